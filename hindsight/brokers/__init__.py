"""Kafka-protocol brokers run as child processes (real Apache Kafka, Tansu) and admin helpers."""

from __future__ import annotations

from hindsight.brokers.admin import consumer_lag, ensure_topics, wait_for_zero_lag
from hindsight.brokers.kafka_server import BrokerProcess, KafkaServer
from hindsight.brokers.tansu import TansuBroker

__all__ = [
    "BrokerProcess",
    "KafkaServer",
    "TansuBroker",
    "consumer_lag",
    "ensure_topics",
    "wait_for_zero_lag",
]
