package kafkarecon.admin;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.common.TopicPartition;

/**
 * The transactions open on a topic's partitions, as Kafka's Admin API tells them (confluent-kafka
 * has no such call): for each partition, each producer with a transaction in progress (its id,
 * epoch, the offset its transaction began at, when it last wrote) and, where the principal may
 * describe it, the transactional id holding it, its state, timeout and start.
 *
 * <p>Usage: {@code OpenTransactions TOPIC PARTITION[,PARTITION...]} with the client's settings
 * (bootstrap, security; Java names) as a properties text on standard input, never on the
 * command line. Prints one JSON object per open transaction, one a line; exits 2 with one line
 * on standard error when the cluster cannot be asked. Read-only: nothing is created or
 * changed.
 */
public final class OpenTransactions {
  private static final long TIMEOUT_S = 15;

  private OpenTransactions() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 2) {
      System.err.println("usage: OpenTransactions TOPIC PARTITION[,PARTITION...]");
      System.exit(2);
    }
    Properties conf = new Properties();
    conf.load(System.in);
    conf.put("allow.auto.create.topics", "false");
    List<TopicPartition> parts = new ArrayList<>();
    for (String p : args[1].split(",")) {
      parts.add(new TopicPartition(args[0], Integer.parseInt(p.trim())));
    }
    try (Admin admin = Admin.create(conf)) {
      for (String line : open(admin, parts)) {
        System.out.println(line);
      }
    } catch (ExecutionException | TimeoutException e) {
      Throwable cause = e.getCause() != null ? e.getCause() : e;
      System.err.println(cause.getClass().getSimpleName() + ": " + cause.getMessage());
      System.exit(2);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      System.exit(2);
    }
  }

  static List<String> open(Admin admin, List<TopicPartition> parts)
      throws ExecutionException, InterruptedException, TimeoutException {
    Map<TopicPartition, PartitionProducerState> states =
        admin.describeProducers(parts).all().get(TIMEOUT_S, TimeUnit.SECONDS);
    // the transactional ids, by producer id: only those the principal may describe are listed
    Map<Long, TransactionListing> byProducer = new HashMap<>();
    Map<String, TransactionDescription> described = new HashMap<>();
    try {
      for (TransactionListing t : admin.listTransactions().all().get(TIMEOUT_S, TimeUnit.SECONDS)) {
        byProducer.put(t.producerId(), t);
      }
      List<String> ids = new ArrayList<>();
      for (TransactionListing t : byProducer.values()) {
        ids.add(t.transactionalId());
      }
      if (!ids.isEmpty()) {
        described.putAll(admin.describeTransactions(ids).all().get(TIMEOUT_S, TimeUnit.SECONDS));
      }
    } catch (ExecutionException e) {
      // no right to list or describe them: the producers alone are still named
    }
    List<String> out = new ArrayList<>();
    for (TopicPartition tp : parts) {
      PartitionProducerState state = states.get(tp);
      if (state == null) {
        continue;
      }
      for (ProducerState p : state.activeProducers()) {
        if (p.currentTransactionStartOffset().isEmpty()) {
          continue;
        }
        StringBuilder json = new StringBuilder("{");
        json.append("\"partition\":").append(tp.partition());
        json.append(",\"producer_id\":").append(p.producerId());
        json.append(",\"producer_epoch\":").append(p.producerEpoch());
        json.append(",\"first_offset\":").append(p.currentTransactionStartOffset().getAsLong());
        json.append(",\"last_timestamp_ms\":").append(p.lastTimestamp());
        TransactionListing listed = byProducer.get(p.producerId());
        if (listed != null) {
          json.append(",\"transactional_id\":").append(quote(listed.transactionalId()));
          json.append(",\"state\":").append(quote(listed.state().toString()));
          TransactionDescription d = described.get(listed.transactionalId());
          if (d != null) {
            json.append(",\"timeout_ms\":").append(d.transactionTimeoutMs());
            if (d.transactionStartTimeMs().isPresent()) {
              json.append(",\"started_ms\":").append(d.transactionStartTimeMs().getAsLong());
            }
          }
        }
        out.add(json.append("}").toString());
      }
    }
    return out;
  }

  static String quote(String text) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }
}
