"""``python -m kafka_spark.cli``: the ``pylog`` command (tests and the broker's discovery start it so)."""

import sys

from kafka_spark.cli.main import main

sys.exit(main())
