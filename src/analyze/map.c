/*
 * map.c - the analysis's 64-bit -> 32-bit open-addressing map (map.h): linear probing,
 * at most half full, doubled when it would pass that.
 */
#include "analyze/map.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"

uint64_t ana_hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

uint32_t ana_map_get(const ana_map *m, uint64_t key)
{
	if (!m->cap)
		return ANA_NONE;
	for (size_t i = ana_hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
		if (m->vals[i] == ANA_NONE || m->keys[i] == key)
			return m->vals[i];
}

int ana_map_put(ana_map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		ana_map nm = {malloc(cap * sizeof *nm.keys), malloc(cap * sizeof *nm.vals), cap, 0};
		if (!nm.keys || !nm.vals) {
			free(nm.keys);
			free(nm.vals);
			return -1;
		}
		memset(nm.vals, 0xff, cap * sizeof *nm.vals);
		for (size_t i = 0; i < m->cap; i++)
			if (m->vals[i] != ANA_NONE)
				ana_map_put(&nm, m->keys[i], m->vals[i]);
		free(m->keys);
		free(m->vals);
		*m = nm;
	}
	size_t i = ana_hash64(key) & (m->cap - 1);
	while (m->vals[i] != ANA_NONE && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (m->vals[i] == ANA_NONE)
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void ana_map_clear(ana_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}
