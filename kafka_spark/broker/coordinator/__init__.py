"""The broker's coordinators, grouped as Kafka groups them (``group-coordinator``,
``transaction-coordinator``): group.py and group_offsets.py (consumer groups and their committed
offsets in ``__consumer_offsets``), transaction.py and transaction_log.py (transactions and
``__transaction_state``).
"""
