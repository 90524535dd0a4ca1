"""Shared by the connector and the embedded broker (Kafka's ``org.apache.kafka.common``).

- topic_partition.py: ``TopicPartition``, as both sides name a partition;
- kafka_errors.py: the error codes the connector's wire clients read;
- jaas.py: Kafka's Java-only security settings (``sasl.jaas.config``) read into librdkafka's;
- record_batch.py: Kafka's record batch v2 layout (header fields and offsets, attribute bits,
  records, transaction markers), for the broker's storage, the executors' decoder and
  ``pylog consume`` (its C walk includes the header generated from it);
- compression.py: the record-batch codecs, for the broker's storage and the executors' Arrow reads;
- kafka_uuid.py: Kafka's random UUIDs (cluster and topic ids);
- durable.py: ``fsync_dir``, the durability of directory entries (the broker's storage and the
  file sink).

The broker imports nothing else of the connector (setup.cfg's layering contracts).
"""
