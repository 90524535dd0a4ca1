/* Generated from kafka_spark/common/record_batch.py: do not edit. Regenerate with
 *     python -m kafka_spark.common.record_batch > kafka_spark/cli/_record_layout.h
 * (tests/common/test_record_batch.py fails when this file and the module disagree). */
#ifndef PYLOG_RECORD_LAYOUT_H
#define PYLOG_RECORD_LAYOUT_H

#define RECORD_BATCH_HEADER_SIZE 61
#define RECORD_BATCH_LOG_OVERHEAD 12
#define RECORD_BATCH_MAGIC 2
#define RECORD_BATCH_MAGIC_OFFSET 16
#define RECORD_BATCH_ATTRIBUTES_OFFSET 21
#define RECORD_BATCH_RECORDS_COUNT_OFFSET 57
#define RECORD_BATCH_COMPRESSION_MASK 0x07
#define RECORD_BATCH_CONTROL_MASK 0x20
#define RECORD_ATTRIBUTES_SIZE 1
#define RECORD_MIN_BODY 6

#endif
