#ifndef LIVEDATA_CMOSQUITTO_SHIM_H
#define LIVEDATA_CMOSQUITTO_SHIM_H

#include <mosquitto.h>
#include <mqtt_protocol.h>

/* The client's own network loop: poll, its wake-up eventfd, corking the socket. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>

#endif
