"""Options of the ``pylog-files`` sink, parsed and validated once when a query or job starts.

Names are spelled as Spark users expect (``path``, ``checkpointLocation``, ``compression``,
``partitionBy``, ``failOnDataLoss``) plus ``fileFormat``, case-insensitive. Unknown options are
errors (naming the known option a typo is close to), and option values are never echoed in
messages (a secret passed by mistake stays out of logs), except the closed sets of formats and
codecs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_spark.files import formats as sink_formats
from kafka_spark.files.fs import FileSinkError
from kafka_spark.option_names import DIFFERS, PYLOG_ONLY, SAME, OptionDoc, did_you_mean, known_names, one_of

SINK_NAME = "pylog-files"
#: The sink's options as the documentation lists them, compared with Spark's file sink
#: (``format("parquet")``); unknown options are errors here, not warnings.
FILE_SINK_OPTIONS: tuple[OptionDoc, ...] = (
    OptionDoc("path", SAME, "", "The output directory, or `.start(path)` / `.save(path)`; local, `hdfs://`, `s3://`."),
    OptionDoc(
        "checkpointLocation",
        SAME,
        "",
        "Spark's checkpoint; required by streaming queries. The sink also reads it to decide whether a new "
        "query continues the output.",
    ),
    OptionDoc(
        "fileFormat",
        PYLOG_ONLY,
        "`parquet`",
        "`parquet`, `avro` or `json`: the files stock Spark reads (the format name Spark's sinks take).",
    ),
    OptionDoc(
        "compression",
        SAME,
        "the format's usual codec",
        "The codec of the data files; the valid ones are listed on error.",
    ),
    OptionDoc(
        "partitionBy",
        DIFFERS,
        "",
        "Comma-separated columns for Hive-style `column=value/` directories, given as this option "
        '(`.option("partitionBy", "country")`) where Spark\'s file sink takes `.partitionBy(...)`.',
    ),
    OptionDoc(
        "failOnDataLoss",
        PYLOG_ONLY,
        "`true`",
        "`false` lets a new query commit batches that leave a gap after the output's last committed offsets "
        "(overlaps are always refused).",
    ),
    # Set by Spark, not by the user: DataStreamWriter.queryName(...) reaches the sink as an option.
    OptionDoc(
        "queryName", SAME, "", "Set by Spark, not by you: a query's `.queryName(...)` reaches the sink as this option."
    ),
)
_KNOWN_OPTIONS = known_names(FILE_SINK_OPTIONS)


class FileSinkOptionError(FileSinkError, ValueError):
    """An option of the file sink is unknown, missing or invalid."""


@dataclass(frozen=True)
class FileSinkOptions:
    """Validated sink options (parsed once, when the query or job starts)."""

    path: str
    checkpoint_location: str | None
    file_format: str
    compression: str
    partition_by: tuple[str, ...]
    fail_on_data_loss: bool

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> FileSinkOptions:
        lowered = {str(k).lower(): v for k, v in options.items()}
        for key in lowered:
            if key not in _KNOWN_OPTIONS:
                # The value is not echoed: it may be a secret passed by mistake.
                raise FileSinkOptionError(
                    f"unknown option {key!r} for format {SINK_NAME!r}."
                    f"{did_you_mean(key, _KNOWN_OPTIONS.values())} Known options: "
                    + ", ".join(sorted(_KNOWN_OPTIONS.values()))
                )
        file_format = lowered.get("fileformat", "parquet").lower()
        if file_format not in sink_formats.FORMATS:
            raise FileSinkOptionError(one_of("option 'fileFormat'", file_format, list(sink_formats.FORMATS)))
        compression = lowered.get("compression", sink_formats.DEFAULT_COMPRESSION[file_format]).lower()
        if compression not in sink_formats.COMPRESSION[file_format]:
            raise FileSinkOptionError(
                one_of(
                    "option 'compression'",
                    compression,
                    list(sink_formats.COMPRESSION[file_format]),
                    f" for fileFormat={file_format}",
                )
            )
        fail_on_data_loss = lowered.get("failondataloss", "true").lower()
        if fail_on_data_loss not in ("true", "false"):
            raise FileSinkOptionError(one_of("option 'failOnDataLoss'", fail_on_data_loss, ["true", "false"]))
        checkpoint = lowered.get("checkpointlocation")
        if streaming and not checkpoint:
            raise FileSinkOptionError(
                f"format {SINK_NAME!r} needs .option('checkpointLocation', ...) on writeStream: the "
                "sink copies each batch's source offsets from <checkpoint>/offsets/<batchId> and the "
                "query id from <checkpoint>/metadata, and a Python writer only sees the query's "
                "options (not spark.sql.streaming.checkpointLocation)"
            )
        partition_by = tuple(c.strip() for c in lowered.get("partitionby", "").split(",") if c.strip())
        return cls(
            path=lowered.get("path", ""),
            checkpoint_location=checkpoint,
            file_format=file_format,
            compression=compression,
            partition_by=partition_by,
            fail_on_data_loss=fail_on_data_loss == "true",
        )
