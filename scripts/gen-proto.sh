#!/usr/bin/env bash
# Regenerates api/**/*.pb.go with pinned tools (make proto). The generated
# code is committed, so building hlab never needs protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_VERSION=3.21.12
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.6.0
PROTOC_GEN_GO_VTPROTO=v0.6.1-0.20240319094008-0393e58bdf10 # databus_vtproto.pb.go: the gateway's codec (internal/gateway/codec.go); pool: a publish batch's structs are reused (internal/gateway/received.go)

if ! protoc --version 2>/dev/null | grep -q "$PROTOC_VERSION"; then
  if command -v apt-get >/dev/null; then
    apt-get install -y -qq "protobuf-compiler=${PROTOC_VERSION}*" >/dev/null || apt-get install -y -qq protobuf-compiler >/dev/null
  fi
  protoc --version | grep -q "$PROTOC_VERSION" || echo "gen-proto: warning: protoc is $(protoc --version), pinned $PROTOC_VERSION" >&2
fi
bin=$(pwd)/bin/tools
mkdir -p "$bin"
GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO
GOBIN=$bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC
GOBIN=$bin go install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$PROTOC_GEN_GO_VTPROTO
PATH=$bin:$PATH protoc -I api \
  --go_out=api --go_opt=paths=source_relative \
  --go-grpc_out=api --go-grpc_opt=paths=source_relative \
  --go-vtproto_out=api --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+unmarshal_unsafe+size+pool \
  --go-vtproto_opt=pool=github.com/highload-lab/hlab/api/databus/v1.PublishRequest \
  --go-vtproto_opt=pool=github.com/highload-lab/hlab/api/databus/v1.Message \
  --go-vtproto_opt=pool=github.com/highload-lab/hlab/api/databus/v1.Header \
  api/databus/v1/databus.proto
echo "gen-proto: regenerated api/databus/v1"
