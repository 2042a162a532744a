# syntax=docker/dockerfile:1
# Multi-stage build: a static gateway (and mock model) on a distroless,
# non-root base.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mockllm ./cmd/mockllm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gateway /usr/local/bin/gateway
COPY --from=build /out/mockllm /usr/local/bin/mockllm
# Embedded mode keeps stored-object ownership here; mount a volume to keep
# it across containers (distributed mode keeps it in Redis instead).
ENV CORRAL_DATA_DIR=/home/nonroot/corral-data
USER nonroot:nonroot
EXPOSE 8080
# No shell or curl in a distroless image: the gateway checks its own
# /readyz on the port of CORRAL_ADDR.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
