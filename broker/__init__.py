"""The data plane: node assembly, replica manager (ISR, high watermark), fetchers, purgatory,
group coordinator, producer state, gRPC servicers and metrics."""
