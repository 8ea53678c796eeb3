package kafkarecon.harness;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * The harness's SQL sink: writes each record's value fields into the columns of one table, over
 * JDBC. Maven Central serves no JDBC sink connector that runs here, and what the tests exercise
 * is Kafka Connect's own runtime around it: error tolerance, the dead-letter queue, retries,
 * offset commits and rebalances. It behaves as the common JDBC sinks do: a row the database
 * refuses is handed to the errant record reporter (so errors.tolerance decides), and a batch is
 * committed to the database before Connect commits its offsets (at least once).
 */
public class SqlSinkConnector extends SinkConnector {
    static final ConfigDef CONFIG = new ConfigDef()
        .define("connection.url", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH,
                "JDBC URL of the database")
        .define("table", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the table written")
        .define("columns", ConfigDef.Type.LIST, ConfigDef.Importance.HIGH,
                "value fields written, each into the column of its name")
        .define("envelope", ConfigDef.Type.STRING, "none", ConfigDef.Importance.MEDIUM,
                "none, or debezium: write a change event's row image (after), skip deletes");

    private Map<String, String> props;

    @Override
    public String version() {
        return "1.0";
    }

    @Override
    public void start(Map<String, String> props) {
        this.props = new HashMap<>(props);
    }

    @Override
    public Class<? extends Task> taskClass() {
        return SqlSinkTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        List<Map<String, String>> out = new ArrayList<>();
        for (int i = 0; i < maxTasks; i++) {
            out.add(props);
        }
        return out;
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return CONFIG;
    }
}
