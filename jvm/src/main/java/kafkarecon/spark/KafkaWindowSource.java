package kafkarecon.spark;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A topic's window, read as fixed offset ranges: kafka-recon's replay reader.
 *
 * <p>Why not Spark's own Kafka source: it gives every task one consumer for one partition, and
 * after every poll asks the broker for the partition's earliest and latest offsets (two
 * round trips) and throws its own prefetched data away. On one machine that read a million
 * records in about 3 s where one consumer for all partitions takes 1 s. Here each task has one
 * consumer for several partitions (or a slice of one), so the broker's fetches for one overlap
 * the processing of another's, and nothing but the records is asked for.
 *
 * <p>Options: {@code topic}; {@code ranges}, each partition's offsets to read as
 * {@code partition:start:end} separated by commas (end exclusive); {@code tasks}, how many
 * Spark tasks share them (default: as many as Spark runs at once); {@code groupId}, the consumers' group (never joined, never
 * committed); {@code pollTimeoutMs}, how long a task waits for the next records of a range
 * before it fails; every option {@code kafka.X} is the consumer's setting X (bootstrap
 * servers, security, isolation level, fetch sizes).
 *
 * <p>Exactly the records of each range are returned: those of offsets in [start, end) the
 * broker still holds and the isolation level lets through (transaction markers and aborted
 * records leave gaps). A range whose start the log no longer holds fails the task (the
 * consumer's offset reset is {@code none}), as does a range whose end is not reached within
 * {@code pollTimeoutMs}: a replay never returns part of a window silently.
 */
public final class KafkaWindowSource implements TableProvider {
  static final StructType SCHEMA = new StructType()
      .add("key", DataTypes.BinaryType)
      .add("value", DataTypes.BinaryType)
      .add("partition", DataTypes.IntegerType)
      .add("offset", DataTypes.LongType)
      .add("timestamp", DataTypes.TimestampType);

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return SCHEMA;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> props) {
    return new WindowTable(lowerKeys(props));
  }

  /**
   * The options with their names in lower case: Spark hands them as given in process and in
   * lower case through Spark Connect; the Kafka client's own names are all lower case.
   */
  static HashMap<String, String> lowerKeys(Map<String, String> options) {
    HashMap<String, String> out = new HashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      out.put(e.getKey().toLowerCase(java.util.Locale.ROOT), e.getValue());
    }
    return out;
  }

  /** One partition's offsets [start, end). */
  static final class Range implements java.io.Serializable {
    final int partition;
    final long start;
    final long end;

    Range(int partition, long start, long end) {
      this.partition = partition;
      this.start = start;
      this.end = end;
    }

    long size() {
      return end - start;
    }
  }

  /** What one task reads: ranges of distinct partitions, with one consumer. */
  static final class Share implements InputPartition {
    final List<Range> ranges = new ArrayList<>();
    long records;
  }

  static final class WindowTable implements Table, SupportsRead {
    private final Map<String, String> props;

    WindowTable(Map<String, String> props) {
      this.props = props;
    }

    @Override
    public String name() {
      return "kafka-window:" + props.getOrDefault("topic", "?");
    }

    @Override
    @SuppressWarnings("deprecation") // Spark 4.0 still asks for it where columns() is not given
    public StructType schema() {
      return SCHEMA;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return Collections.singleton(TableCapability.BATCH_READ);
    }

    /**
     * The topic as OpenLineage names a Kafka dataset (kafka://first-bootstrap-server, topic):
     * its Spark listener reads these properties of a table it does not know, so the Spark
     * job's lineage names the topic as it did with Spark's own Kafka source.
     */
    @Override
    public Map<String, String> properties() {
      Map<String, String> out = new HashMap<>();
      String servers = props.get("kafka.bootstrap.servers");
      if (servers != null && props.containsKey("topic")) {
        String first = servers.split(",")[0].trim();
        int scheme = first.indexOf("://");
        out.put("openlineage.dataset.namespace",
            "kafka://" + (scheme >= 0 ? first.substring(scheme + 3) : first));
        out.put("openlineage.dataset.name", props.get("topic"));
      }
      return out;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      Map<String, String> all = new HashMap<>(props);
      all.putAll(lowerKeys(options.asCaseSensitiveMap()));
      return () -> new WindowScan(all);
    }
  }

  static String required(Map<String, String> options, String name) {
    String v = options.get(name);
    if (v == null || v.isEmpty()) {
      throw new IllegalArgumentException("kafka-window source: option '" + name + "' is required");
    }
    return v;
  }

  static List<Range> parseRanges(String text) {
    List<Range> out = new ArrayList<>();
    for (String part : text.split(",")) {
      if (part.isBlank()) {
        continue;
      }
      String[] f = part.trim().split(":");
      if (f.length != 3) {
        throw new IllegalArgumentException(
            "kafka-window source: range '" + part + "' is not partition:start:end");
      }
      Range r = new Range(Integer.parseInt(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2]));
      if (r.start < 0 || r.end < r.start) {
        throw new IllegalArgumentException("kafka-window source: range '" + part + "' is empty "
            + "or negative");
      }
      out.add(r);
    }
    return out;
  }

  /**
   * The ranges dealt to {@code tasks} shares of about equal records: a partition larger than
   * a share's fair part is cut into slices first, then the largest pieces go first, each to the
   * share with the fewest records that does not read that partition yet.
   */
  static List<Share> deal(List<Range> ranges, int tasks) {
    long total = 0;
    for (Range r : ranges) {
      total += r.size();
    }
    List<Range> pieces = new ArrayList<>();
    long fair = Math.max(1, (total + tasks - 1) / Math.max(1, tasks));
    for (Range r : ranges) {
      if (r.size() == 0) {
        continue;
      }
      long cuts = Math.max(1, (r.size() + fair - 1) / fair);
      long step = (r.size() + cuts - 1) / cuts;
      for (long s = r.start; s < r.end; s += step) {
        pieces.add(new Range(r.partition, s, Math.min(r.end, s + step)));
      }
    }
    pieces.sort(Comparator.comparingLong(Range::size).reversed());
    List<Share> shares = new ArrayList<>();
    for (int i = 0; i < Math.max(1, Math.min(tasks, pieces.size())); i++) {
      shares.add(new Share());
    }
    for (Range p : pieces) {
      Share best = null;
      for (Share s : shares) {
        boolean has = s.ranges.stream().anyMatch(x -> x.partition == p.partition);
        if (!has && (best == null || s.records < best.records)) {
          best = s;
        }
      }
      if (best == null) { // every share reads this partition already: a share of its own
        best = new Share();
        shares.add(best);
      }
      best.ranges.add(p);
      best.records += p.size();
    }
    shares.removeIf(s -> s.ranges.isEmpty());
    return shares;
  }

  static final class WindowScan implements Scan, Batch {
    private final Map<String, String> options;

    WindowScan(Map<String, String> options) {
      this.options = options;
    }

    @Override
    public StructType readSchema() {
      return SCHEMA;
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      // as many shares as Spark runs tasks at once, unless told
      String told = options.get("tasks");
      int tasks = told != null ? Integer.parseInt(told)
          : SparkContext.getOrCreate().defaultParallelism();
      return deal(parseRanges(options.getOrDefault("ranges", "")), tasks)
          .toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new ReaderFactory(new HashMap<>(options));
    }
  }

  static final class ReaderFactory implements PartitionReaderFactory {
    private final HashMap<String, String> options;

    ReaderFactory(HashMap<String, String> options) {
      this.options = options;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return new ShareReader(options, (Share) partition);
    }
  }

  static final class ShareReader implements PartitionReader<InternalRow> {
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Map<TopicPartition, Range> open = new HashMap<>();
    private final String topic;
    private final long pollTimeoutMs;
    private Iterator<ConsumerRecord<byte[], byte[]>> batch = Collections.emptyIterator();
    private InternalRow current;
    private long idleSince = -1;

    ShareReader(Map<String, String> options, Share share) {
      topic = required(options, "topic");
      pollTimeoutMs = Long.parseLong(options.getOrDefault("polltimeoutms", "120000"));
      Map<String, Object> conf = new HashMap<>();
      for (Map.Entry<String, String> e : options.entrySet()) {
        if (e.getKey().startsWith("kafka.")) {
          conf.put(e.getKey().substring("kafka.".length()), e.getValue());
        }
      }
      conf.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
      conf.put("value.deserializer",
          "org.apache.kafka.common.serialization.ByteArrayDeserializer");
      conf.put("enable.auto.commit", "false");
      // a monitor never changes the cluster it watches: asking about a topic must not create it
      conf.put("allow.auto.create.topics", "false");
      conf.put("auto.offset.reset", "none");
      conf.put("group.id", required(options, "groupid"));
      consumer = new KafkaConsumer<>(conf);
      for (Range r : share.ranges) {
        if (r.size() > 0) {
          open.put(new TopicPartition(topic, r.partition), r);
        }
      }
      consumer.assign(new ArrayList<>(open.keySet()));
      for (Map.Entry<TopicPartition, Range> e : open.entrySet()) {
        consumer.seek(e.getKey(), e.getValue().start);
      }
    }

    @Override
    public boolean next() {
      while (true) {
        while (batch.hasNext()) {
          ConsumerRecord<byte[], byte[]> r = batch.next();
          Range range = open.get(new TopicPartition(r.topic(), r.partition()));
          // a fetch may run past a range's end, or hold a partition already closed
          if (range == null || r.offset() < range.start || r.offset() >= range.end) {
            continue;
          }
          current = new GenericInternalRow(new Object[] {
              r.key(), r.value(), r.partition(), r.offset(), r.timestamp() * 1000L});
          return true;
        }
        closeReached();
        if (open.isEmpty()) {
          return false;
        }
        ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(
            Math.min(1000, pollTimeoutMs)));
        if (got.isEmpty()) {
          long now = System.currentTimeMillis();
          if (idleSince < 0) {
            idleSince = now;
          } else if (now - idleSince > pollTimeoutMs) {
            throw new IllegalStateException(stalled());
          }
        } else {
          idleSince = -1;
        }
        batch = got.iterator();
      }
    }

    /** Stops fetching the partitions whose range has been read to its end. */
    private void closeReached() {
      List<TopicPartition> done = new ArrayList<>();
      for (Map.Entry<TopicPartition, Range> e : open.entrySet()) {
        if (consumer.position(e.getKey()) >= e.getValue().end) {
          done.add(e.getKey());
        }
      }
      if (!done.isEmpty()) {
        consumer.pause(done);
        for (TopicPartition tp : done) {
          open.remove(tp);
        }
      }
    }

    private String stalled() {
      StringBuilder b = new StringBuilder("kafka-window source: no records for " + pollTimeoutMs
          + " ms before the end of the window's offsets:");
      Set<TopicPartition> tps = new HashSet<>(open.keySet());
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
      for (TopicPartition tp : tps) {
        b.append(" ").append(tp).append(" at offset ").append(consumer.position(tp))
            .append(", range end ").append(open.get(tp).end)
            .append(", log end ").append(ends.get(tp)).append(";");
      }
      return b.toString();
    }

    @Override
    public InternalRow get() {
      return current;
    }

    @Override
    public void close() {
      consumer.close(Duration.ofSeconds(5));
    }
  }
}
