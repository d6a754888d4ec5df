/*
 * nvtx_app.c - a program annotated with NVTX (the header-only NVTX 3 of the CUDA toolkit),
 * as PyTorch's torch.cuda.nvtx and emit_nvtx annotate: recorded with `fennec record --gpu`,
 * its ranges must become regions. Needs no GPU and does not link libfennec.
 *
 * Ranges, each spinning on the CPU: "step" (outer, 3 times) containing "forward" (10 ms,
 * nvtxRangePushA), "backward" (5 ms, a domain range with a registered string) and
 * "aten::mm, seq = N" (2 ms, N different each time: one region "aten::mm").
 *
 * Then, on the main thread unless said:
 * - start/end ranges: "load" 3 times (nvtxRangeStartA, 4 ms each); "io" once (a domain
 *   range, nvtxDomainRangeStartEx with the registered string "io", 3 ms); "wide start" once
 *   (nvtxRangeStartW, 2 ms); "handoff" once, started here (nvtxRangeStartEx, an ASCII
 *   message) and ended by another thread 8 ms later;
 * - marks: "epoch" 3 times (nvtxMarkA), "checkpoint \u2713" once (nvtxMarkW: a wide
 *   message with a non-ASCII character), "sync point" once (nvtxDomainMarkEx);
 * - a wide push: region "wide r\u00e9gion" (nvtxRangePushW, 3 ms).
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <wchar.h>

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

static void *end_later(void *arg)
{
	spin_ms(8);
	nvtxRangeEnd(*(nvtxRangeId_t *)arg);
	return NULL;
}

static void start_end_and_marks(nvtxDomainHandle_t dom)
{
	nvtxEventAttributes_t a = {0};
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "handoff";
	nvtxRangeId_t handoff = nvtxRangeStartEx(&a);
	pthread_t th;
	pthread_create(&th, NULL, end_later, &handoff);
	for (int i = 0; i < 3; i++) {
		nvtxMarkA("epoch");
		nvtxRangeId_t id = nvtxRangeStartA("load");
		spin_ms(4);
		nvtxRangeEnd(id);
	}
	pthread_join(th, NULL);
	nvtxEventAttributes_t io = a;
	io.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	io.message.registered = nvtxDomainRegisterStringA(dom, "io");
	nvtxRangeId_t id = nvtxDomainRangeStartEx(dom, &io);
	spin_ms(3);
	nvtxDomainRangeEnd(dom, id);
	id = nvtxRangeStartW(L"wide start");
	spin_ms(2);
	nvtxRangeEnd(id);
	nvtxMarkW(L"checkpoint \u2713");
	nvtxEventAttributes_t m = a;
	m.message.ascii = "sync point";
	nvtxDomainMarkEx(dom, &m);
	nvtxRangePushW(L"wide r\u00e9gion");
	spin_ms(3);
	nvtxRangePop();
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
	start_end_and_marks(dom);
	return 0;
}
