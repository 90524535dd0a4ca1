"""Pointing the same pipeline at a real Kafka cluster and a Spark cluster: what changes.

Shows: the only differences from the laptop version are two settings —
`kafka.bootstrap.servers` (your brokers, plus kafka.security.protocol / kafka.sasl.* /
kafka.ssl.* as your cluster needs; they are passed to librdkafka and never written to
checkpoints or outputs) and the Spark master (standalone, YARN, Kubernetes). Executors need
pylog installed in the Python they run (PYSPARK_PYTHON) and the output on a shared filesystem
(HDFS, S3, NFS). Nothing in pylog assumes local mode.

    KAFKA_BOOTSTRAP_SERVERS=kafka-1:9092,kafka-2:9092 SPARK_MASTER=spark://master:7077 \\
    OUTPUT=hdfs:///data/orders TOPIC=orders python examples/external_cluster.py

Without KAFKA_BOOTSTRAP_SERVERS it uses the local embedded broker (started on demand).
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession, functions as F  # noqa: E402

bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")  # change 1: your Kafka cluster
master = os.environ.get("SPARK_MASTER", "local[2]")     # change 2: your Spark cluster
topic = os.environ.get("TOPIC", "orders")
output = os.environ.get("OUTPUT", "/tmp/pylog-external/orders")

spark = SparkSession.builder.master(master).appName("pylog-external").getOrCreate()
reader = spark.readStream.format("pylog").option("subscribe", topic).option("startingOffsets", "earliest")
if bootstrap:
    reader = reader.option("kafka.bootstrap.servers", bootstrap)
query = (
    reader.load()
    .select("topic", "partition", "offset", "timestamp", F.col("value").cast("string").alias("value"))
    .writeStream.format("pylog-files")
    .option("checkpointLocation", output + "-checkpoint")
    .trigger(availableNow=True)
    .start(output)
)
query.awaitTermination()
print(f"{spark.read.parquet(output).count()} records in {output}")
spark.stop()
