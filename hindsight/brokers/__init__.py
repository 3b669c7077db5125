"""Kafka-protocol brokers run as child processes (real Apache Kafka, Tansu) and admin helpers."""

from __future__ import annotations

from hindsight.brokers.admin import (
    GroupState,
    committed_offsets,
    consumer_lag,
    delete_topics,
    describe_group,
    ensure_topics,
    read_topic,
    wait_for_zero_lag,
)
from hindsight.brokers.kafka_server import BrokerProcess, KafkaServer
from hindsight.brokers.tansu import TansuBroker

__all__ = [
    "BrokerProcess",
    "GroupState",
    "KafkaServer",
    "TansuBroker",
    "committed_offsets",
    "consumer_lag",
    "delete_topics",
    "describe_group",
    "ensure_topics",
    "read_topic",
    "wait_for_zero_lag",
]
