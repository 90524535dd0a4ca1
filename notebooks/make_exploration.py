"""Writes notebooks/exploration.ipynb from the cells below (the notebook is generated, so its
source stays reviewable as Python; the test suite executes the .ipynb)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell(
        "# Exploring a stream with pylog\n\n"
        "Start an embedded Kafka-compatible broker, produce sample orders, read them back with "
        "`spark.read.format(\"pylog\")`, look at partitions, throughput and consumer lag, then watch "
        "a streaming query fill a memory sink. Nothing to install beyond pylog itself."
    ),
    new_code_cell(
        "import os, sys, time\n"
        "os.environ.setdefault('PYSPARK_PYTHON', sys.executable)  # executors use this interpreter\n"
        "%matplotlib inline\n"
        "import matplotlib.pyplot as plt\n"
        "from pyspark.sql import SparkSession, functions as F\n"
        "from kafka_spark.broker import EmbeddedBroker\n"
        "from kafka_spark.sample_data import produce_orders\n"
        "\n"
        "broker = EmbeddedBroker().start()          # temporary data; broker.close() removes it\n"
        "broker.create_topic('orders', partitions=4)\n"
        "print('broker at', broker.bootstrap_servers)"
    ),
    new_code_cell(
        "started = time.perf_counter()\n"
        "produced = produce_orders(broker.bootstrap_servers, 'orders', 20_000)\n"
        "print(f'{produced:,} orders in {time.perf_counter() - started:.1f}s')"
    ),
    new_code_cell(
        "spark = (SparkSession.builder.master('local[2]').appName('pylog-exploration')\n"
        "         .config('spark.sql.shuffle.partitions', '4').config('spark.ui.enabled', 'false')\n"
        "         .getOrCreate())\n"
        "orders = (spark.read.format('pylog')\n"
        "          .option('kafka.bootstrap.servers', broker.bootstrap_servers)\n"
        "          .option('subscribe', 'orders')\n"
        "          .option('includeHeaders', 'true')\n"
        "          .load())\n"
        "orders.printSchema()\n"
        "orders.select('key', 'partition', 'offset', 'timestamp').show(5, truncate=False)"
    ),
    new_markdown_cell("## Records per partition"),
    new_code_cell(
        "per_partition = orders.groupBy('partition').count().orderBy('partition').toPandas()\n"
        "assert per_partition['count'].sum() == produced\n"
        "ax = per_partition.plot.bar(x='partition', y='count', legend=False, title='records per partition')\n"
        "per_partition"
    ),
    new_markdown_cell("## Throughput over (event) time\n\nOrders per minute of their Kafka timestamp."),
    new_code_cell(
        "per_minute = (orders.groupBy(F.window('timestamp', '1 minute').start.alias('minute')).count()\n"
        "              .orderBy('minute').toPandas())\n"
        "ax = per_minute.plot(x='minute', y='count', legend=False, title='orders per minute')\n"
        "len(per_minute)"
    ),
    new_markdown_cell(
        "## Consumer lag\n\nA consumer group that has read part of the topic: lag is the log end "
        "offset minus its committed offset, per partition."
    ),
    new_code_cell(
        "from confluent_kafka import Consumer, TopicPartition\n"
        "reader = Consumer({'bootstrap.servers': broker.bootstrap_servers, 'group.id': 'dashboard',\n"
        "                   'enable.auto.commit': False})\n"
        "partitions = [TopicPartition('orders', p) for p in range(4)]\n"
        "reader.commit(offsets=[TopicPartition('orders', p, 1000 * (p + 1)) for p in range(4)], asynchronous=False)\n"
        "committed = {tp.partition: tp.offset for tp in reader.committed(partitions, timeout=10)}\n"
        "ends = {p: reader.get_watermark_offsets(TopicPartition('orders', p), timeout=10)[1] for p in range(4)}\n"
        "reader.close()\n"
        "lag = {p: ends[p] - committed[p] for p in range(4)}\n"
        "plt.figure(); plt.bar(list(lag), list(lag.values())); plt.title('lag of group dashboard per partition')\n"
        "lag"
    ),
    new_markdown_cell("## Streaming into a memory sink\n\nNew orders arrive while the query runs."),
    new_code_cell(
        "stream = (spark.readStream.format('pylog')\n"
        "          .option('kafka.bootstrap.servers', broker.bootstrap_servers)\n"
        "          .option('subscribe', 'orders')\n"
        "          .option('startingOffsets', 'earliest')\n"
        "          .option('maxOffsetsPerTrigger', 5000)\n"
        "          .load()\n"
        "          .select(F.get_json_object(F.col('value').cast('string'), '$.country').alias('country')))\n"
        "query = (stream.groupBy('country').count().writeStream.outputMode('complete')\n"
        "         .format('memory').queryName('orders_by_country').start())\n"
        "query.processAllAvailable()\n"
        "produce_orders(broker.bootstrap_servers, 'orders', 5_000, first_id=produced)\n"
        "query.processAllAvailable()\n"
        "counts = spark.table('orders_by_country').toPandas().sort_values('count', ascending=False)\n"
        "assert counts['count'].sum() == produced + 5_000\n"
        "counts"
    ),
    new_code_cell("query.stop()\nspark.stop()\nbroker.close()"),
]

notebook = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
nbformat.write(notebook, Path(__file__).with_name("exploration.ipynb"))
