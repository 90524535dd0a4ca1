"""The Spark driver that scripts/chaos_pipeline.py kills: pylog source -> transform -> sink.

    chaos_driver.py BOOTSTRAP SOURCE_TOPIC files|topic OUTPUT CHECKPOINT run|drain

``run`` streams with a 200 ms trigger and at most 300 records per micro-batch (many batches, so
many commits to be killed in) until killed; ``drain`` processes what is available
(Trigger.AvailableNow, 5,000 records per micro-batch) and exits.
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession, functions as F  # noqa: E402

bootstrap, source, sink, output, checkpoint, mode = sys.argv[1:7]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 300 if mode == "run" else 5000)
        .load()
        .select("partition", "offset", (F.col("value").cast("string").cast("long") * 10).alias("seq10")))
if sink == "files":
    writer = rows.writeStream.format("pylog-files").option("path", output)
else:
    writer = (rows.select(F.col("seq10").cast("string").alias("value"))
              .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", output))
writer = writer.option("checkpointLocation", checkpoint)
writer = writer.trigger(availableNow=True) if mode == "drain" else writer.trigger(processingTime="200 milliseconds")
query = writer.start()
query.awaitTermination()
spark.stop()
