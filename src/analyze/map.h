/*
 * map.h - the analysis's open-addressing map from a 64-bit key to a 32-bit value
 * (ANA_NONE: absent), for interning names, region nodes, GPU streams and kernels.
 */
#ifndef FENNEC_ANALYZE_MAP_H
#define FENNEC_ANALYZE_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ana_map {
	uint64_t *keys;
	uint32_t *vals; /* ANA_NONE: empty slot */
	size_t cap, n;
} ana_map;

/* A 64-bit mixer (the map's hash): for building keys out of several fields. */
uint64_t ana_hash64(uint64_t k);
/* The value of `key`, or ANA_NONE. */
uint32_t ana_map_get(const ana_map *m, uint64_t key);
/* Set `key` to `val` (not ANA_NONE). 0, or -1 when out of memory (the map is unchanged). */
int ana_map_put(ana_map *m, uint64_t key, uint32_t val);
/* Free the slots; the map is empty and reusable. */
void ana_map_clear(ana_map *m);

#endif
