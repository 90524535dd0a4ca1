"""The Spark driver that scripts/chaos_pipeline.py kills: pylog source -> transform -> sink.

    chaos_driver.py BOOTSTRAP SOURCE_TOPIC files|files-nokafka|topic OUTPUT CHECKPOINT MODE [from-output]

Sinks: ``files`` writes ``partition, offset, seq10`` (the Quickstart's shape: Kafka columns but no
topic) with pylog-files, ``files-nokafka`` writes ``seq10, label`` (no Kafka column at all),
``topic`` writes ``seq10`` as the value of the topic OUTPUT with the pylog topic sink.

Modes: ``run`` streams with a 200 ms trigger and at most 300 records per micro-batch (many
batches, so many commits to be killed in) until killed; ``drain`` processes what is available
(Trigger.AvailableNow, 5,000 records per micro-batch) and exits; ``probe`` is a new query on the
existing output (CHECKPOINT is a fresh one) reading from earliest under Trigger.AvailableNow: the
file sink must refuse it, and the driver exits with 3 when it was refused as the sink promises,
0 if it was not. With ``from-output``, the source starts from the output's offsets
(startingOffsetsFromOutput) when the query is new: the pipeline's checkpoint was lost.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F

bootstrap, source, sink, output, checkpoint, mode = sys.argv[1:7]
from_output = len(sys.argv) > 7 and sys.argv[7] == "from-output"
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
reader = (
    spark.readStream.format("pylog")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", source)
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", 300 if mode == "run" else 5000)
)
if from_output:
    reader = reader.option("startingOffsetsFromOutput", output)
seq10 = (F.col("value").cast("string").cast("long") * 10).alias("seq10")
rows = reader.load()
if sink == "files":
    writer = rows.select("partition", "offset", seq10).writeStream.format("pylog-files").option("path", output)
elif sink == "files-nokafka":
    writer = rows.select(seq10, F.lit("chaos").alias("label")).writeStream.format("pylog-files").option("path", output)
else:
    writer = (
        rows.select(seq10.cast("string").alias("value"))
        .writeStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output)
    )
writer = writer.option("checkpointLocation", checkpoint)
writer = writer.trigger(processingTime="200 milliseconds") if mode == "run" else writer.trigger(availableNow=True)
query = writer.start()
if mode == "probe":
    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        refused = "does not continue the output" in str(exc)
        print("probe: refused" if refused else f"probe: failed otherwise: {exc}", flush=True)
        spark.stop()
        sys.exit(3 if refused else 1)
    print("probe: NOT refused", flush=True)
    spark.stop()
    sys.exit(0)
query.awaitTermination()
spark.stop()
