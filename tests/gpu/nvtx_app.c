/*
 * nvtx_app.c - a program annotated with NVTX (the header-only NVTX 3 of the CUDA toolkit),
 * as PyTorch's torch.cuda.nvtx and emit_nvtx annotate: recorded with `fennec record --gpu`,
 * its ranges must become regions. Needs no GPU and does not link libfennec.
 *
 * Ranges, each spinning on the CPU: "step" (outer, 3 times) containing "forward" (10 ms,
 * nvtxRangePushA), "backward" (5 ms, a domain range with a registered string) and
 * "aten::mm, seq = N" (2 ms, N different each time: one region "aten::mm").
 */
#include <stdio.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void spin_ms(int ms)
{
	unsigned long long end = now_ns() + (unsigned long long)ms * 1000000ull;
	while (now_ns() < end)
		;
}

int main(void)
{
	nvtxDomainHandle_t dom = nvtxDomainCreateA("app");
	nvtxStringHandle_t backward = nvtxDomainRegisterStringA(dom, "backward");
	for (int i = 0; i < 3; i++) {
		nvtxRangePushA("step");
		nvtxRangePushA("forward");
		spin_ms(10);
		nvtxRangePop();
		nvtxEventAttributes_t a = {0};
		a.version = NVTX_VERSION;
		a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
		a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
		a.message.registered = backward;
		nvtxDomainRangePushEx(dom, &a);
		spin_ms(5);
		nvtxDomainRangePop(dom);
		char name[64];
		snprintf(name, sizeof name, "aten::mm, seq = %d", 100 + i);
		nvtxRangePushA(name);
		spin_ms(2);
		nvtxRangePop();
		nvtxRangePop();
	}
	return 0;
}
