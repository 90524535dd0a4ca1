"""The broker's coordinators, grouped and split as Kafka's are (``group-coordinator``,
``transaction-coordinator``).

* The group coordinator (group.py): ownership of groups, committed offsets (group_offsets.py,
  ``__consumer_offsets``); the classic protocol (classic_group.py on the state machine of
  classic_state.py) and KIP-848's consumer protocol (consumer_group.py, assignors.py,
  heartbeat_checks.py), sharing their membership code (membership.py).
* The transaction coordinator (transaction.py): the state machine (transaction_state.py), the log
  (transaction_log.py, ``__transaction_state``) and the marker channel (txn_markers.py).
* What both use of their broker, through narrow interfaces (context.py).
"""
