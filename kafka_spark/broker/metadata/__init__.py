"""The cluster's metadata: which brokers are alive, which topics exist, and each partition's
leader, epochs, replicas and in-sync replicas.

* ``controller.py``: the controller (KRaft's active controller, in process): it decides every
  change (registrations and fencing, topic creation and deletion, leader and ISR changes) and
  publishes each as an immutable ``MetadataImage`` that the brokers apply.
"""
