package kafkarecon.harness;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Types;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** One task of {@link SqlSinkConnector}: one transaction per batch, a savepoint per row. */
public class SqlSinkTask extends SinkTask {
    private Connection db;
    private PreparedStatement insert;
    private List<String> columns;
    private boolean debezium;
    private ErrantRecordReporter reporter;

    @Override
    public String version() {
        return "1.0";
    }

    @Override
    public void start(Map<String, String> props) {
        AbstractConfig config = new AbstractConfig(SqlSinkConnector.CONFIG, props);
        columns = config.getList("columns");
        debezium = "debezium".equals(config.getString("envelope"));
        String marks = String.join(",", java.util.Collections.nCopies(columns.size(), "?"));
        try {
            db = DriverManager.getConnection(config.getString("connection.url"));
            db.setAutoCommit(false);
            insert = db.prepareStatement("INSERT INTO " + config.getString("table") + " ("
                + String.join(",", columns) + ") VALUES (" + marks + ")");
        } catch (SQLException e) {
            throw new ConnectException("cannot open " + config.getString("table"), e);
        }
        reporter = context.errantRecordReporter();
    }

    @Override
    public void put(Collection<SinkRecord> records) {
        try {
            for (SinkRecord r : records) {
                Map<?, ?> row = row(r);
                if (row == null) {
                    continue;
                }
                Savepoint before = db.setSavepoint();
                try {
                    for (int i = 0; i < columns.size(); i++) {
                        Object v = row.get(columns.get(i));
                        // text the server casts to the column's type, as a JDBC sink binds it
                        insert.setObject(i + 1, v == null ? null : v.toString(), Types.OTHER);
                    }
                    insert.executeUpdate();
                    db.releaseSavepoint(before);
                } catch (SQLException e) {
                    db.rollback(before);
                    if (reporter == null) {
                        throw new ConnectException(e);
                    }
                    // the framework decides: skip (errors.tolerance=all), dead-letter queue, or
                    // fail the task (errors.tolerance=none)
                    reporter.report(r, e);
                }
            }
            db.commit();
        } catch (SQLException e) {
            throw new ConnectException("writing a batch", e);
        }
    }

    private Map<?, ?> row(SinkRecord r) {
        Object value = r.value();
        if (value == null) {
            return null;  // a tombstone
        }
        if (!(value instanceof Map)) {
            throw new DataException("expected a JSON object as the value, got " + value.getClass());
        }
        Map<?, ?> map = (Map<?, ?>) value;
        if (!debezium) {
            return map;
        }
        Object after = map.get("after");
        return after instanceof Map ? (Map<?, ?>) after : null;  // a delete has no after image
    }

    @Override
    public void stop() {
        try {
            if (db != null) {
                db.close();
            }
        } catch (SQLException e) {
            // closing: nothing is left to lose
        }
    }
}
