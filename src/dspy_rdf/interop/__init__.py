"""Traces in other vocabularies: OpenTelemetry spans as OTLP JSON (:mod:`.otlp`) and the PROV-O view of a store
(:mod:`.prov`)."""
