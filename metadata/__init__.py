"""Cluster metadata: metadata records, the immutable image and its deltas, the controller's
managers and replica placement."""
