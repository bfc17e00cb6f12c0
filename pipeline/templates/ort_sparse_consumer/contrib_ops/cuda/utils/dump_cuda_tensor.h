// Stand-in for ONNX Runtime's tensor dumping: off, as in ORT's release builds.
#pragma once
#define DUMP_TENSOR_LEVEL 0
#define DUMP_TENSOR_INIT()
#define DUMP_TENSOR(...)
