# Multi-stage build of the hookrelay binary (api, worker, migrate, dev).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/hookrelay ./cmd/hookrelay

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookrelay /usr/local/bin/hookrelay
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hookrelay"]
CMD ["api"]
