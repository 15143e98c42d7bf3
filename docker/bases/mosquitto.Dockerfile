# A stand-in for eclipse-mosquitto:2, for a machine with no registry: Debian's mosquitto
# with the official image's layout (config in /mosquitto/config, data in /mosquitto/data,
# the broker running as the mosquitto user) and mosquitto_sub for the compose files'
# health checks. The compose files take it through MOSQUITTO_IMAGE (scripts/container-test).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mosquitto mosquitto-clients \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /mosquitto/config /mosquitto/data /mosquitto/log \
    && chown -R mosquitto:mosquitto /mosquitto/data /mosquitto/log
EXPOSE 1883
VOLUME ["/mosquitto/data"]
# The official image starts as root and drops to "mosquitto" (the config names no user, and
# mosquitto's default is that user).
CMD ["/usr/sbin/mosquitto", "-c", "/mosquitto/config/mosquitto.conf"]
