"""One broker's side of replication: its replicas of the partitions the metadata assigns it.

* ``replica_manager.py``: leader (high watermark, ISR, acks=all) or follower (fetches from the
  leader over the wire, truncates by leader epoch) of each partition the broker hosts.
* ``client.py``: the broker-to-broker connection followers fetch through and coordinators send
  WriteTxnMarkers on.
"""
