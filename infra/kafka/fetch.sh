#!/usr/bin/env bash
# Fetch the Apache Kafka broker jars (kafka_2.13 and its runtime dependencies) from Maven Central,
# and the command-line tools jar (kafka-tools: the console producer and consumer; its dependencies
# are among the broker's).
#
# Usage: infra/kafka/fetch.sh
#   HINDSIGHT_KAFKA_HOME  target folder (default: <repo>/.cache/kafka-4.4.0); broker jars go to
#                         $HINDSIGHT_KAFKA_HOME/libs, the tools jar to $HINDSIGHT_KAFKA_HOME/tools
#                         (java -cp "libs/*:tools/*" org.apache.kafka.tools.ConsoleProducer ...)
#
# Idempotent: skips what is already there (stamp files libs/.complete, tools/.complete).
# Quiet: prints nothing on success; Maven's output is shown only when it fails.
# Needs: mvn and Java 17+ on PATH. Used by hindsight.brokers.kafka_server.KafkaServer.
set -euo pipefail

KAFKA_VERSION="4.4.0"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$here/../.." && pwd)"
kafka_home="${HINDSIGHT_KAFKA_HOME:-$repo_root/.cache/kafka-$KAFKA_VERSION}"
libs="$kafka_home/libs"
stamp="$libs/.complete"

tools="$kafka_home/tools"
tools_stamp="$tools/.complete"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$KAFKA_VERSION" \
      && -f "$tools_stamp" && "$(cat "$tools_stamp")" == "$KAFKA_VERSION" ]]; then
  exit 0
fi

if ! command -v mvn >/dev/null 2>&1; then
  echo "fetch.sh: mvn not found on PATH (Debian: apt-get install -y maven)" >&2
  exit 1
fi

mkdir -p "$kafka_home"
staging="$(mktemp -d "$kafka_home/.libs.XXXXXX")"
log="$(mktemp)"
trap 'rm -rf "$staging" "$log"' EXIT

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$KAFKA_VERSION" ]]; then
  if ! mvn -q -B -Dstyle.color=never -f "$here/pom.xml" \
      -Dkafka.version="$KAFKA_VERSION" \
      dependency:copy-dependencies -DoutputDirectory="$staging" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch.sh: resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION from Maven Central failed" >&2
    exit 1
  fi
  if ! compgen -G "$staging/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null; then
    echo "fetch.sh: kafka_2.13-$KAFKA_VERSION.jar missing after resolution" >&2
    exit 1
  fi
  echo "$KAFKA_VERSION" >"$staging/.complete"
  rm -rf "$libs"
  mv "$staging" "$libs"
  mkdir -p "$staging"
fi

if [[ ! -f "$tools_stamp" || "$(cat "$tools_stamp")" != "$KAFKA_VERSION" ]]; then
  # The tools jar alone: everything it needs at run time is already among the broker's jars.
  if ! mvn -q -B -Dstyle.color=never -f "$here/pom.xml" \
      dependency:copy -Dartifact="org.apache.kafka:kafka-tools:$KAFKA_VERSION" \
      -DoutputDirectory="$staging" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch.sh: resolving org.apache.kafka:kafka-tools:$KAFKA_VERSION from Maven Central failed" >&2
    exit 1
  fi
  echo "$KAFKA_VERSION" >"$staging/.complete"
  rm -rf "$tools"
  mv "$staging" "$tools"
fi
