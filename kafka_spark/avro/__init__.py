"""Avro for the pylog source and topic sink, and the embedded Schema Registry.

codec.py (decoders and encoders, plain and Confluent wire format), schema.py (loading schemas and
their Spark / Arrow types), compatibility.py (schema resolution rules), registry_server.py and
registry_store.py (the embedded Schema Registry: ``EmbeddedSchemaRegistry``).
"""
