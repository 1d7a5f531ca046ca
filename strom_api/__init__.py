"""The wire contract: generated gRPC/protobuf code (strom_api.v1) and the RecordBatch v2 codec
shared by clients and servers."""
