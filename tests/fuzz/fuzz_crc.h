/*
 * fuzz_crc.h - the custom mutator both fuzz harnesses share. Nearly every mutation of a
 * profile fails its chunk's CRC-32C, so a plain fuzzer never gets past the checksum: after
 * libFuzzer's own mutation this recomputes the CRC of every chunk whose payload lies in
 * the input, so that the mutated bytes reach the decoders. One mutation in eight is left
 * as it is, so the checksum and resync paths stay covered.
 */
#ifndef FENNEC_FUZZ_CRC_H
#define FENNEC_FUZZ_CRC_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "format/format.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static void fuzz_fix_crcs(uint8_t *data, size_t size)
{
	size_t off = FMT_PREAMBLE_LEN;
	while (off < size && size - off >= FMT_CHUNK_HDR_LEN) {
		uint8_t *h = data + off;
		uint32_t stored = cm_le32(h + 4);
		if (stored > size - off - FMT_CHUNK_HDR_LEN)
			break;
		uint32_t crc = cm_crc32c(cm_crc32c(0, h, 12), h + FMT_CHUNK_HDR_LEN, stored);
		for (int i = 0; i < 4; i++)
			h[12 + i] = (uint8_t)(crc >> (8 * i));
		off += FMT_CHUNK_HDR_LEN + stored;
	}
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	size = LLVMFuzzerMutate(data, size, max_size);
	if (seed % 8)
		fuzz_fix_crcs(data, size);
	return size;
}

#endif
