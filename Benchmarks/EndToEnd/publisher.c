// The stream of the end-to-end benchmark: COUNT QoS 1 live updates over LOCATIONS
// locations x 5 domains (occupancy, temperature, co2, humidity, availability), about 60-byte
// payloads with epoch-millisecond timestamps, at most WINDOW unacknowledged at a time. Prints
// the seconds until the broker acknowledged the last one. RATE (updates a second, optional):
// paced at that rate rather than as fast as the window allows (0: not paced). SEED: another
// stream of values (the default is 12345).
//   publisher PORT COUNT LOCATIONS WINDOW [RATE [SEED]]
#include <mosquitto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long acknowledged;

static void on_publish(struct mosquitto *client, void *context, int mid) {
    (void)client; (void)context; (void)mid;
    acknowledged++;
}

// Runs the network loop once; a lost connection ends the program (the broker went away).
static void loop(struct mosquitto *client, int timeout) {
    int code = mosquitto_loop(client, timeout, 1);
    if (code == MOSQ_ERR_NO_CONN || code == MOSQ_ERR_CONN_LOST || code == MOSQ_ERR_ERRNO) {
        fprintf(stderr, "publisher: %s\n", mosquitto_strerror(code));
        exit(1);
    }
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc > 7) { fprintf(stderr, "usage: publisher PORT COUNT LOCATIONS WINDOW [RATE [SEED]]\n"); return 2; }
    int port = atoi(argv[1]);
    long count = atol(argv[2]), locations = atol(argv[3]);
    int window = atoi(argv[4]);
    double rate = argc >= 6 ? atof(argv[5]) : 0;
    mosquitto_lib_init();
    struct mosquitto *client = mosquitto_new("bench-publisher", true, NULL);
    mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_publish_callback_set(client, on_publish);
    if (mosquitto_connect(client, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "publisher: cannot connect\n"); return 1; }
    static const char *domains[] = {"occupancy", "temperature", "co2", "humidity", "availability"};
    char topic[128], payload[160];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    unsigned long long seed = argc == 7 ? strtoull(argv[6], NULL, 10) : 12345;
    for (long sent = 0; sent < count; sent++) {
        // The window: wait for acknowledgements while too many are out.
        while (sent - acknowledged >= window) loop(client, 10);
        // The pace: while ahead of it by a millisecond or more, read acknowledgements.
        while (rate > 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double ahead = sent / rate - ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9);
            if (ahead < 0.001) break;
            loop(client, (int)(ahead * 1000));
        }
        long number = sent % locations;
        int domain = (int)((sent / locations) % 5);
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned value = (unsigned)(seed >> 33);
        snprintf(topic, sizeof topic, "bench/hq/b%ld/f%ld/r%ld/loc-%ld/%s", number % 4, number / 4 % 10, number / 40 % 25, number, domains[domain]);
        long long ms = now_ms();
        switch (domain) {
            case 0: snprintf(payload, sizeof payload, "{\"timestamp\":%lld,\"properties\":{\"nrOfPeople\":\"%u\"}}", ms, value % 9); break;
            case 1: snprintf(payload, sizeof payload, "{\"timestamp\":%lld,\"properties\":{\"temperature\":\"%u.%u\"}}", ms, 15 + value % 14, value % 10); break;
            case 2: snprintf(payload, sizeof payload, "{\"timestamp\":%lld,\"properties\":{\"co2Level\":\"%u\"}}", ms, 400 + value % 1200); break;
            case 3: snprintf(payload, sizeof payload, "{\"timestamp\":%lld,\"properties\":{\"relativeHumidity\":\"%u\"}}", ms, 20 + value % 60); break;
            default: snprintf(payload, sizeof payload, "{\"timestamp\":%lld,\"properties\":{\"available\":\"%s\"}}", ms, value % 2 ? "true" : "false"); break;
        }
        int code = mosquitto_publish(client, NULL, topic, (int)strlen(payload), payload, 1, false);
        if (code != MOSQ_ERR_SUCCESS) { fprintf(stderr, "publisher: %s\n", mosquitto_strerror(code)); return 1; }
        // Without a loop thread, a publish is written at once; acknowledgements are read
        // every 64 (a loop per message would cost a poll(2) each and hold the rate down).
        if (sent % 64 == 63) loop(client, 0);
    }
    while (acknowledged < count) loop(client, 10);
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("published %ld in %.6f s\n", count, (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9);
    mosquitto_disconnect(client);
    mosquitto_destroy(client);
    mosquitto_lib_cleanup();
    return 0;
}
