#ifndef LIVEDATA_CMOSQUITTO_SHIM_H
#define LIVEDATA_CMOSQUITTO_SHIM_H

#include <mosquitto.h>
#include <mqtt_protocol.h>

#endif
