# mocker in a container: the static binary alone (no shell, no libc), for mocker serve, frontend,
# worker, predict and recommend alike. Build: docker build -t mocker .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /mocker ./cmd/mocker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /mocker /mocker
EXPOSE 8000
ENTRYPOINT ["/mocker"]
