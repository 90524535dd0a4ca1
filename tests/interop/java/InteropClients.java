// Kafka's Java clients (kafka-clients of .cache/kafka/libs) driven by the interop tests.
// Compiled at test time with javac; one JVM per command. Every line printed on stdout is a
// result the test parses; diagnostics go to stderr.
//
//   txn-produce BOOTSTRAP TOPIC TRANSACTIONAL_ID PREFIX COMMITTED ABORTED
//       one transaction of COMMITTED records (values PREFIX-c-<i>) committed, then one of
//       ABORTED records (PREFIX-a-<i>) aborted, then COMMITTED more (PREFIX-d-<i>) committed.
//   read BOOTSTRAP TOPIC ISOLATION TIMEOUT_MS
//       reads every partition from the beginning up to its end offset (the last stable offset
//       under read_committed) and prints "RECORD <partition> <offset> <value>" for each record.
//   group BOOTSTRAP TOPIC GROUP MEMBERS [PROTOCOL]
//       MEMBERS consumers in one group, each on its own thread: with PROTOCOL "classic" (the
//       default) the cooperative-sticky assignor, with "consumer" KIP-848's protocol
//       (group.protocol=consumer, the broker's assignor); prints "ASSIGNED <member> <p,p>" / "REVOKED <member> <p,p>" / "LOST ..." from
//       the rebalance listener and "RECORD <member> <partition> <offset>" for each record.
//       Reads commands on stdin: "stop <member>" closes that member, "quit" closes all.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class InteropClients {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "txn-produce" -> txnProduce(args[1], args[2], args[3], args[4],
                    Integer.parseInt(args[5]), Integer.parseInt(args[6]));
            case "read" -> read(args[1], args[2], args[3], Long.parseLong(args[4]));
            case "group" -> group(args[1], args[2], args[3], Integer.parseInt(args[4]),
                    args.length > 5 ? args[5] : "classic");
            case "follow" -> follow(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4]));
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.out.flush();
    }

    static void txnProduce(String bootstrap, String topic, String transactionalId, String prefix,
                           int committed, int aborted) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            sendAll(producer, topic, prefix + "-c-", committed);
            producer.commitTransaction();
            System.out.println("COMMITTED " + committed);
            sendAll(producer, topic, prefix + "-a-", aborted);
            producer.flush();
            producer.abortTransaction();
            System.out.println("ABORTED " + aborted);
            sendAll(producer, topic, prefix + "-d-", committed);
            producer.commitTransaction();
            System.out.println("COMMITTED " + committed);
        }
    }

    static void sendAll(KafkaProducer<String, String> producer, String topic, String prefix, int count) {
        producer.beginTransaction();
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, "k" + i, prefix + i));
        }
    }

    /** A consumer (no group, no commits) assigned every partition of {@code topic}, at its beginning. */
    static KafkaConsumer<String, String> fromBeginning(String bootstrap, String topic, String isolation,
            long timeoutMs) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        List<TopicPartition> partitions = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs))) {
            partitions.add(new TopicPartition(topic, info.partition()));
        }
        consumer.assign(partitions);
        consumer.seekToBeginning(partitions);
        return consumer;
    }

    static void read(String bootstrap, String topic, String isolation, long timeoutMs) {
        try (KafkaConsumer<String, String> consumer = fromBeginning(bootstrap, topic, isolation, timeoutMs)) {
            Map<TopicPartition, Long> end = consumer.endOffsets(consumer.assignment(), Duration.ofMillis(timeoutMs));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end offsets " + end);
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("RECORD " + record.partition() + " " + record.offset() + " " + record.value());
                }
            }
            System.out.println("END " + end.values().stream().mapToLong(Long::longValue).sum());
        }
    }

    /** Reads every partition from the beginning as records arrive, printing each at once, until
     *  {@code expected} records were read (then END n) or {@code timeoutMs} passes (then it fails). */
    static void follow(String bootstrap, String topic, long expected, long timeoutMs) {
        try (KafkaConsumer<String, String> consumer = fromBeginning(bootstrap, topic, "read_uncommitted", timeoutMs)) {
            long deadline = System.currentTimeMillis() + timeoutMs;
            long read = 0;
            while (read < expected) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("read " + read + " of " + expected + " records");
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("RECORD " + record.partition() + " " + record.offset() + " " + record.value());
                    read++;
                }
                System.out.flush();
            }
            System.out.println("END " + read);
        }
    }

    static boolean reached(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> entry : end.entrySet()) {
            if (consumer.position(entry.getKey()) < entry.getValue()) {
                return false;
            }
        }
        return true;
    }

    static void group(String bootstrap, String topic, String groupId, int members, String protocol)
            throws Exception {
        Map<Integer, AtomicBoolean> running = new HashMap<>();
        List<Thread> threads = new ArrayList<>();
        for (int m = 0; m < members; m++) {
            AtomicBoolean flag = new AtomicBoolean(true);
            running.put(m, flag);
            int member = m;
            Thread thread = new Thread(() -> {
                try {
                    member(bootstrap, topic, groupId, member, protocol, flag);
                } catch (RuntimeException e) {
                    say("FAILED " + member + " " + e);  // the test's events name why a member stopped
                    throw e;
                }
            }, "member-" + m);
            thread.start();
            threads.add(thread);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split(" ");
            if (words[0].equals("stop")) {
                running.get(Integer.parseInt(words[1])).set(false);
                threads.get(Integer.parseInt(words[1])).join();
                say("STOPPED " + words[1]);
            } else if (words[0].equals("quit")) {
                break;
            }
        }
        running.values().forEach(flag -> flag.set(false));
        for (Thread thread : threads) {
            thread.join();
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String partitions(Collection<TopicPartition> partitions) {
        TreeSet<Integer> sorted = new TreeSet<>();
        partitions.forEach(tp -> sorted.add(tp.partition()));
        StringBuilder text = new StringBuilder();
        for (int p : sorted) {
            text.append(text.length() == 0 ? "" : ",").append(p);
        }
        return text.toString();
    }

    static void member(String bootstrap, String topic, String groupId, int member, String protocol,
                       AtomicBoolean running) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "member-" + member);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        }
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        say("REVOKED " + member + " " + partitions(partitions));
                    }
                }

                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    say("ASSIGNED " + member + " " + partitions(partitions));
                }

                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    say("LOST " + member + " " + partitions(partitions));
                }
            });
            while (running.get()) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                    say("RECORD " + member + " " + record.partition() + " " + record.offset());
                }
                try {
                    consumer.commitSync();
                } catch (RebalanceInProgressException e) {
                    // A cooperative rebalance is under way: the next poll() completes it, then the
                    // commit is made again (what the consumer's documentation tells applications).
                    // Uncaught, it ended the member's thread and its partitions showed as LOST.
                    say("COMMIT-AFTER-REBALANCE " + member);
                }
            }
        }
    }
}
