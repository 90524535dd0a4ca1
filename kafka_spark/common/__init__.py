"""Shared by the connector and the embedded broker (Kafka's ``org.apache.kafka.common``).

topic_partition.py, jaas.py (Kafka's Java-only security settings) and kafka_errors.py (the error
codes the connector's wire clients read). The broker imports nothing else of the connector.
"""
