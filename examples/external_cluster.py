"""Pointing the same pipeline at a real Kafka cluster and a Spark cluster: what changes.

Shows: the only differences from the laptop version are two settings —
`kafka.bootstrap.servers` (your brokers, plus kafka.security.protocol / kafka.sasl.* /
kafka.ssl.* as your cluster needs; they are passed to librdkafka and never written to
checkpoints or outputs) and the Spark master (standalone, YARN, Kubernetes). Executors need
pylog installed in the Python they run (PYSPARK_PYTHON) and the output on a shared filesystem
(HDFS, S3, NFS). Nothing in pylog assumes local mode.

    KAFKA_BOOTSTRAP_SERVERS=kafka-1:9092,kafka-2:9092 SPARK_MASTER=spark://master:7077 \\
    OUTPUT=hdfs:///data/orders TOPIC=orders python examples/external_cluster.py

Run as it is (python examples/external_cluster.py), it stands in for the cluster with a
temporary embedded broker holding 1,000 sample orders in TOPIC, and stops it at the end. OUTPUT
defaults to a new temporary directory (fine for a local master; give a cluster a shared path).
A TOPIC that the cluster does not have fails at once, naming it.
"""

import os
import sys
import tempfile
from contextlib import ExitStack

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F

bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")  # change 1: your Kafka cluster
master = os.environ.get("SPARK_MASTER", "local[2]")  # change 2: your Spark cluster
topic = os.environ.get("TOPIC", "orders")
output = os.environ.get("OUTPUT") or os.path.join(tempfile.mkdtemp(prefix="pylog-external-"), "orders")

with ExitStack() as cleanup:
    if not bootstrap:  # the laptop version: a broker in this process, stopped when the block ends
        from kafka_spark.broker import EmbeddedBroker
        from kafka_spark.sample_data import produce_orders

        broker = cleanup.enter_context(EmbeddedBroker())
        broker.create_topic(topic, partitions=3)
        produce_orders(broker.bootstrap_servers, topic, 1_000)
        bootstrap = broker.bootstrap_servers
    else:
        try:
            topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics
        except KafkaException as exc:
            sys.exit(f"cannot list the topics of KAFKA_BOOTSTRAP_SERVERS={bootstrap}: {exc}")
        if topic not in topics:
            sys.exit(
                f"topic {topic!r} does not exist on {bootstrap}: set TOPIC to one of "
                f"{sorted(t for t in topics if not t.startswith('__'))}"
            )

    spark = SparkSession.builder.master(master).appName("pylog-external").getOrCreate()
    cleanup.callback(spark.stop)
    rows = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("topic", "partition", "offset", "timestamp", F.col("value").cast("string").alias("value"))
    )
    query = (
        rows.writeStream.format("pylog-files")
        .option("checkpointLocation", output + "-checkpoint")
        .trigger(availableNow=True)
        .start(output)
    )
    query.awaitTermination()
    # The schema is the query's: an empty topic gives an empty output, not a schema to infer.
    print(f"{spark.read.schema(rows.schema).parquet(output).count()} records in {output}")
