"""Writes notebooks/exploration.ipynb from the cells below (the notebook is generated, so its
source stays reviewable as Python; tests/test_notebook.py executes the .ipynb and checks that
every figure it draws has labelled axes).

Run: ``.venv/bin/python notebooks/make_exploration.py``
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

cells = [
    new_markdown_cell(
        "# Exploring a stream with pylog\n\n"
        "Start an embedded Kafka-compatible broker, produce sample orders of an online shop, read them "
        'back with `spark.read.format("pylog")`, then run a streaming query and watch it work: its '
        "consumer lag as Kafka's tools see it, its throughput and the size and duration of each "
        "micro-batch. Nothing to install beyond pylog itself. The data is small and the query runs a "
        "handful of micro-batches, so most of the run time goes into starting Spark."
    ),
    new_code_cell(
        "import json, os, shutil, sys, tempfile, time\n"
        "os.environ.setdefault('PYSPARK_PYTHON', sys.executable)  # executors use this interpreter\n"
        "os.environ.setdefault('SPARK_LOCAL_IP', '127.0.0.1')      # Spark binds to loopback only\n"
        "%matplotlib inline\n"
        "import matplotlib.pyplot as plt\n"
        "from matplotlib.dates import DateFormatter\n"
        "from matplotlib.ticker import MaxNLocator\n"
        "from pyspark.sql import SparkSession, functions as F\n"
        "from kafka_spark.broker import EmbeddedBroker\n"
        "from kafka_spark.sample_data import produce_orders\n"
        "\n"
        "PARTITIONS = 4\n"
        "broker = EmbeddedBroker().start()          # temporary data; broker.close() removes it\n"
        "broker.create_topic('orders', partitions=PARTITIONS)\n"
        "print('broker at', broker.bootstrap_servers)"
    ),
    new_code_cell(
        "started = time.perf_counter()\n"
        "produced = produce_orders(broker.bootstrap_servers, 'orders', 10_000)\n"
        "print(f'{produced:,} orders in {time.perf_counter() - started:.1f}s')"
    ),
    new_code_cell(
        "spark = (SparkSession.builder.master('local[2]').appName('pylog-exploration')\n"
        "         .config('spark.sql.shuffle.partitions', '4').config('spark.ui.enabled', 'false')\n"
        "         .config('spark.sql.session.timeZone', 'UTC').config('spark.ui.showConsoleProgress', 'false')\n"
        "         .getOrCreate())\n"
        "spark.sparkContext.setLogLevel('ERROR')\n"
        "orders = (spark.read.format('pylog')\n"
        "          .option('kafka.bootstrap.servers', broker.bootstrap_servers)\n"
        "          .option('subscribe', 'orders')\n"
        "          .option('includeHeaders', 'true')\n"
        "          .load())\n"
        "orders.printSchema()\n"
        "(orders.where('offset < 3').orderBy('partition', 'offset')  # the first records of each partition\n"
        " .selectExpr('CAST(key AS STRING) AS key', 'partition', 'offset', 'timestamp').show(truncate=False))"
    ),
    new_markdown_cell(
        "## Records per partition\n\n"
        "The producer picks a partition from the record key (the customer id), so each partition "
        "holds all orders of its customers and the split is only roughly even. Each bar is the number "
        "of records (messages) one partition of topic `orders` holds."
    ),
    new_code_cell(
        "per_partition = orders.groupBy('partition').count().orderBy('partition').toPandas()\n"
        "assert per_partition['count'].sum() == produced\n"
        "fig, ax = plt.subplots(figsize=(6, 3.5))\n"
        "ax.bar(per_partition['partition'], per_partition['count'])\n"
        "ax.set_xticks(range(PARTITIONS))  # partitions are numbered 0, 1, 2, ...: one tick each\n"
        "ax.set(title='Records per partition of topic orders', xlabel='partition',\n"
        "       ylabel='records (messages)')\n"
        "plt.show()\n"
        "per_partition"
    ),
    new_markdown_cell(
        "## Orders over event time\n\n"
        "Every order carries its event time as the Kafka record timestamp; the simulated shop takes "
        "about four orders a second. The line counts orders per minute of event time (tumbling "
        "one-minute windows over `timestamp`; the last minute is only partly filled), so it shows the "
        "shape of the data, not how fast pylog reads it: that comes from the streaming query below."
    ),
    new_code_cell(
        "per_minute = (orders.groupBy(F.window('timestamp', '1 minute').start.alias('minute')).count()\n"
        "              .orderBy('minute').toPandas())\n"
        "fig, ax = plt.subplots(figsize=(8, 3.5))\n"
        "ax.plot(per_minute['minute'], per_minute['count'])\n"
        "ax.set_ylim(bottom=0)\n"
        "ax.xaxis.set_major_formatter(DateFormatter('%H:%M'))\n"
        "ax.set(title='Orders per minute of event time',\n"
        "       xlabel=f\"event time on {per_minute['minute'].iloc[0]:%Y-%m-%d} (UTC, hh:mm)\",\n"
        "       ylabel='orders per minute')\n"
        "plt.show()"
    ),
    new_markdown_cell(
        "## A streaming query that commits its progress to a consumer group\n\n"
        "The query reads `orders` from the beginning, at most 4,000 records per micro-batch, and "
        "counts orders per country into an in-memory table. With `commitOffsetsToGroup=true`, each "
        "finished batch's end offsets are committed to the consumer group named by `kafka.group.id`, "
        "so Kafka's lag tools (`kafka-consumer-groups --describe`, `pylog groups describe`) see how "
        "far behind the query is. Spark's checkpoint remains what the query resumes from.\n\n"
        "`group_lag()` reads that group's committed offsets with an admin client, exactly as a lag "
        "monitor would: lag of a partition = its log end offset − the group's committed offset."
    ),
    new_code_cell(
        "from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition\n"
        "from confluent_kafka.admin import AdminClient, OffsetSpec\n"
        "\n"
        "GROUP, MAX_PER_BATCH = 'exploration-dashboard', 4_000\n"
        "admin = AdminClient({'bootstrap.servers': broker.bootstrap_servers})\n"
        "topic_partitions = [TopicPartition('orders', p) for p in range(PARTITIONS)]\n"
        "\n"
        "def log_end_offsets():\n"
        '    """Per partition: the offset the next record produced to it will get."""\n'
        "    listed = admin.list_offsets({tp: OffsetSpec.latest() for tp in topic_partitions}, request_timeout=10)\n"
        "    return {tp.partition: future.result().offset for tp, future in listed.items()}\n"
        "\n"
        "def group_lag():\n"
        '    """Per partition: log end offset - the group\'s committed offset (none before its first commit)."""\n'
        "    request = [ConsumerGroupTopicPartitions(GROUP, topic_partitions)]\n"
        "    committed = admin.list_consumer_group_offsets(request, request_timeout=10)[GROUP].result()\n"
        "    ends = log_end_offsets()\n"
        "    return {tp.partition: ends[tp.partition] - tp.offset "
        "for tp in committed.topic_partitions if tp.offset >= 0}\n"
        "\n"
        "stream = (spark.readStream.format('pylog')\n"
        "          .option('kafka.bootstrap.servers', broker.bootstrap_servers)\n"
        "          .option('subscribe', 'orders')\n"
        "          .option('startingOffsets', 'earliest')\n"
        "          .option('maxOffsetsPerTrigger', MAX_PER_BATCH)\n"
        "          .option('kafka.group.id', GROUP)\n"
        "          .option('commitOffsetsToGroup', 'true')\n"
        "          .load()\n"
        "          .select(F.get_json_object(F.col('value').cast('string'), '$.country').alias('country')))\n"
        "checkpoint = tempfile.mkdtemp(prefix='pylog-exploration-')\n"
        "query = (stream.groupBy('country').count().writeStream.outputMode('complete')\n"
        "         .format('memory').queryName('orders_by_country')\n"
        "         .option('checkpointLocation', checkpoint).start())\n"
        "query_started = time.monotonic()"
    ),
    new_markdown_cell(
        "While the query works through the 10,000 orders already in the topic, and then through a "
        "burst of 3,000 new ones, sample the group's lag a few times a second. Each sample also "
        "records how far the query itself has read (the `endOffset` of its latest batch, from "
        "`query.lastProgress`). Waits are bounded: a query that stops making progress fails the cell "
        "after two minutes instead of hanging."
    ),
    new_code_cell(
        "samples = []  # (seconds since the query started, group lag per partition, records the query has not read)\n"
        "\n"
        "def query_position():\n"
        '    """Per partition: the offset the query\'s latest batch read up to (empty before its first batch)."""\n'
        "    progress = query.lastProgress\n"
        "    if not progress or not progress['sources']:\n"
        "        return {}\n"
        "    end = progress['sources'][0]['endOffset']\n"
        "    end = json.loads(end) if isinstance(end, str) else end\n"
        "    return {int(p): int(offset) for p, offset in end.get('orders', {}).items()}\n"
        "\n"
        "def sample_until_read(ends, timeout_s=120):\n"
        '    """Sample lag until the query has read every partition up to ``ends``."""\n'
        "    deadline = time.monotonic() + timeout_s\n"
        "    while True:\n"
        "        if query.exception() is not None:\n"
        "            raise query.exception()\n"
        "        position = query_position()\n"
        "        unread = sum(ends[p] - position.get(p, 0) for p in ends)\n"
        "        lag = group_lag()\n"
        "        if lag:\n"
        "            samples.append((time.monotonic() - query_started, lag, unread))\n"
        "        if unread == 0:\n"
        "            return\n"
        "        if time.monotonic() > deadline:\n"
        "            raise TimeoutError(f'the query still had {unread} records to read after {timeout_s}s')\n"
        "        time.sleep(0.2)  # the sampling interval\n"
        "\n"
        "sample_until_read(log_end_offsets())\n"
        "burst = produce_orders(broker.bootstrap_servers, 'orders', 3_000, first_id=produced)\n"
        "sample_until_read(log_end_offsets())\n"
        "counts = spark.table('orders_by_country').toPandas().sort_values('count', ascending=False)\n"
        "assert counts['count'].sum() == produced + burst\n"
        "print(f'{len(samples)} lag samples; orders per country:')\n"
        "counts"
    ),
    new_markdown_cell(
        "## Consumer lag of the query's group\n\n"
        "Left: the group's lag summed over partitions (log end offset − committed offset), sampled "
        "while the query ran, beside the records the query itself had not yet read. Both fall in "
        "steps of one micro-batch as the backlog is read, jump when the burst arrives and fall "
        "again. They move together because Spark tells a source that batch N is done when it plans "
        "batch N+1, right after N finishes; once the query is idle, the group's offsets trail by its "
        "last batch until new data arrives (the README's `commitOffsetsToGroup` row).\n\n"
        "Right: the group's lag per partition in the sample where its total was largest."
    ),
    new_code_cell(
        "seconds = [s for s, _, _ in samples]\n"
        "assert all(value >= 0 for _, lag, _ in samples for value in lag.values())\n"
        "largest = max((lag for _, lag, _ in samples), key=lambda lag: sum(lag.values()))\n"
        "\n"
        "fig, (over_time, per_partition) = plt.subplots(1, 2, figsize=(11, 3.8), width_ratios=[2, 1])\n"
        "over_time.step(seconds, [sum(lag.values()) for _, lag, _ in samples], where='post', marker='.',\n"
        "               label=f'group {GROUP} (committed offsets)')\n"
        "over_time.step(seconds, [unread for _, _, unread in samples], where='post', linestyle='--',\n"
        "               label='query (end offsets of its latest batch)')\n"
        "over_time.set_xlim(left=0)\n"
        "over_time.set_ylim(bottom=0)\n"
        "over_time.legend(loc='lower left', fontsize='small')\n"
        "over_time.set(title='Lag while the query runs', xlabel='time since the query started (s)',\n"
        "              ylabel='records behind the log end')\n"
        "per_partition.bar(list(largest), list(largest.values()))\n"
        "per_partition.set_xticks(range(PARTITIONS))\n"
        "per_partition.set(title='Largest lag, per partition', xlabel='partition',\n"
        "                  ylabel='records behind the log end')\n"
        "fig.tight_layout()\n"
        "plt.show()"
    ),
    new_markdown_cell(
        "## Throughput per micro-batch\n\n"
        "From `query.recentProgress`, one entry per micro-batch: `processedRowsPerSecond` is the "
        "number of records a batch read divided by the time the batch took. Batch 0 reads nothing "
        "(pylog's first batch only fixes where a new query starts, see the README), so its bar is "
        "empty. Batches that read fewer records (the end of the backlog, parts of the burst) tend to "
        "show lower rates, because each batch has a fixed cost of its own. The axis starts at zero "
        "so that bar heights compare."
    ),
    new_code_cell(
        "# Executed batches only: while idle, Spark also reports progress without running a batch.\n"
        "batches = {p['batchId']: p for p in query.recentProgress if 'addBatch' in p['durationMs']}\n"
        "batch_ids = sorted(batches)\n"
        "assert sum(batches[b]['numInputRows'] for b in batch_ids) == produced + burst\n"
        "\n"
        "fig, ax = plt.subplots(figsize=(7, 3.5))\n"
        "ax.bar(batch_ids, [batches[b]['processedRowsPerSecond'] for b in batch_ids])\n"
        "ax.set_ylim(bottom=0)\n"
        "ax.xaxis.set_major_locator(MaxNLocator(integer=True))\n"
        "ax.set(title='Throughput of the streaming query', xlabel='micro-batch id',\n"
        "       ylabel='records processed per second')\n"
        "plt.show()"
    ),
    new_markdown_cell(
        "## Progress of the streaming query\n\n"
        "Left: records read by each micro-batch (`numInputRows`); the dotted line is the cap set by "
        "`maxOffsetsPerTrigger`, which is split across partitions in proportion to what each has to "
        "read, so full batches come out a few records under it. Right: how long each batch took "
        "from start to commit (`durationMs.triggerExecution`), in seconds; the first ones also pay "
        "for planning the query and starting Spark's Python workers."
    ),
    new_code_cell(
        "fig, (rows, duration) = plt.subplots(1, 2, figsize=(11, 3.5))\n"
        "rows.bar(batch_ids, [batches[b]['numInputRows'] for b in batch_ids])\n"
        "rows.axhline(MAX_PER_BATCH, color='grey', linestyle=':', label='maxOffsetsPerTrigger')\n"
        "rows.set_ylim(0, MAX_PER_BATCH * 1.3)\n"
        "rows.legend(loc='upper right', fontsize='small')\n"
        "rows.set(title='Records per micro-batch', xlabel='micro-batch id', ylabel='records read')\n"
        "duration.plot(batch_ids, [batches[b]['durationMs']['triggerExecution'] / 1000 for b in batch_ids], "
        "marker='o')\n"
        "duration.set_ylim(bottom=0)\n"
        "duration.set(title='Duration of each micro-batch', xlabel='micro-batch id', ylabel='duration (s)')\n"
        "for ax in (rows, duration):\n"
        "    ax.xaxis.set_major_locator(MaxNLocator(integer=True))\n"
        "fig.tight_layout()\n"
        "plt.show()"
    ),
    new_code_cell(
        "query.stop()\n"
        "spark.stop()\n"
        "del admin  # closes its connections before the broker goes away\n"
        "broker.close()\n"
        "shutil.rmtree(checkpoint, ignore_errors=True)"
    ),
]

for index, cell in enumerate(cells):
    cell["id"] = f"cell-{index:02d}"  # stable ids: regenerating changes only what changed

notebook = new_notebook(
    cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
)
nbformat.write(notebook, Path(__file__).with_name("exploration.ipynb"))
