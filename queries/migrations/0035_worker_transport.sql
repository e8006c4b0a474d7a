-- The wire protocol a worker stream speaks (grpc, grpcweb or connect, as
-- connect-go names them), for the catalog: an operator tells a browser's
-- gRPC-Web proxy from an h2c back end, or finds the client still on the
-- Connect protocol. Null for polling workers, and in a row an older
-- replica wrote.
alter table workers add column transport text;
