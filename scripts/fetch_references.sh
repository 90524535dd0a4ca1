#!/usr/bin/env bash
# Resolves the reference implementations the interop tests and benchmarks run beside pylog, with
# Maven from Maven Central (nothing else is downloaded, at bootstrap or at test time):
#   .cache/kafka/libs        Apache Kafka's broker, tools and clients (scripts/references/kafka-pom.xml)
#   .cache/spark-kafka/jars  Spark's Kafka connector, spark-sql-kafka-0-10 (spark-kafka-pom.xml)
# Each folder carries a stamp with the hash of its pom: a second run resolves nothing, and runs
# no Maven at all. Maven's local repository (~/.m2) is tried offline first, so a machine that
# resolved them once (e.g. another checkout) copies them without the network.
set -euo pipefail
cd "$(dirname "$0")/.."

resolve() {  # resolve POM DEST
  local pom=$1 dest=$2 stamp="$2/.resolved" hash
  hash=$(sha256sum "$pom" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
    return 0
  fi
  echo "fetch_references: resolving $(basename "$pom") into $dest"
  rm -rf "$dest"
  mkdir -p "$dest"
  local goal=(-q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime
              "-DoutputDirectory=$PWD/$dest")
  if ! mvn -o "${goal[@]}" >/dev/null 2>&1; then
    mvn "${goal[@]}"
  fi
  echo "$hash" > "$stamp"
}

resolve scripts/references/kafka-pom.xml .cache/kafka/libs
resolve scripts/references/spark-kafka-pom.xml .cache/spark-kafka/jars
