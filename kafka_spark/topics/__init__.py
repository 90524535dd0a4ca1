"""The topic sink's machinery (Spark's ``KafkaWriter`` / ``KafkaWriteTask`` / ``producer/``).

task.py: options, schema checks, the producer pool, the exactly-once transactional write and the
writers of ``df.writeStream.format("pylog")`` / ``df.write.format("pylog")``.
"""
