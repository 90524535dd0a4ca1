"""Reading: Spark's ``KafkaBatch`` / ``KafkaMicroBatchStream`` and the executors' partition readers.

batch.py and stream.py run in Spark's planner worker on the driver; partition.py (and, on the
Arrow fetch path, arrow.py with record_decoder.py and arrow_columns.py) run in the executors.
late_binding.py resolves a batch read's ``earliest`` / ``latest`` / timestamps at each execution.
Nothing here is imported until Spark asks for a reader.
"""
