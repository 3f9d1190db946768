"""The real clients of other servers against a running `rfdetr serve`: Roboflow's inference-sdk (with
supervision's Detections.from_inference) and Home Assistant's deepstack-python give the same detections as
/predict for the same image and threshold. Run by scripts/compat-clients.sh (which installs the pinned clients
and starts the servers); exits 1 naming the first difference.

usage: compat_clients.py --url URL --model-id ID [--segment] [--api-key KEY] IMAGE...
"""
import argparse
import base64
import json
import sys
import urllib.request

import numpy as np
import supervision as sv
from deepstack.core import DeepstackObject
from inference_sdk import InferenceConfiguration, InferenceHTTPClient
from inference_sdk.http.errors import HTTPCallErrorError

TOL = 1e-3  # pixels: the centre form is re-derived in float64 by the client


def predict(url, key, image_path, **params):
    body = json.dumps({"image": base64.b64encode(open(image_path, "rb").read()).decode(), **params}).encode()
    headers = {"content-type": "application/json", **({"x-api-key": key} if key else {})}
    with urllib.request.urlopen(urllib.request.Request(f"{url}/predict", data=body, headers=headers)) as r:
        return json.load(r)


def threshold_for(url, key, image_path):
    """A threshold halfway between the 20th and 21st best scores: /predict keeps score > threshold, the
    clients' servers >=, so no score sits on it; 20 detections make the comparison mean something."""
    scores = [d["score"] for d in predict(url, key, image_path, threshold=0.0, max_detections=300)["detections"]]
    if len(scores) < 21:
        raise SystemExit(f"{image_path}: /predict gives only {len(scores)} detections at threshold 0")
    return (scores[19] + scores[20]) / 2


def fail(msg):
    print(f"compat-clients: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check_roboflow(url, key, model_id, image_path, t, segment):
    ours = predict(url, key, image_path, threshold=t, max_detections=300, **({"mask_format": "polygon"} if segment else {}))
    client = InferenceHTTPClient(api_url=url, api_key=key)
    client.configure(InferenceConfiguration(confidence_threshold=t, max_detections=300, api_key_transport="legacy"))
    result = client.infer(image_path, model_id=model_id)
    preds = result["predictions"]
    dets = ours["detections"]
    if len(preds) != len(dets):
        fail(f"roboflow {image_path}: {len(preds)} predictions, /predict {len(dets)}")
    if result["image"] != ours["image_size"]:
        fail(f"roboflow {image_path}: image {result['image']} != {ours['image_size']}")
    kept = [i for i, p in enumerate(preds) if not segment or len(p["points"]) >= 3]
    det = sv.Detections.from_inference(result)
    if len(det) != len(kept):
        fail(f"supervision {image_path}: {len(det)} detections, expected {len(kept)}")
    want = np.array([dets[i]["box"] for i in kept], dtype=float).reshape(-1, 4)
    if not np.allclose(det.xyxy, want, atol=TOL):
        fail(f"supervision {image_path}: xyxy {det.xyxy[:3]} != /predict {want[:3]}")
    if not np.allclose(det.confidence, [dets[i]["score"] for i in kept], atol=1e-12):
        fail(f"supervision {image_path}: confidence differs")
    if list(det.class_id) != [dets[i]["label_id"] for i in kept] or list(det.data["class_name"]) != [dets[i]["label"] for i in kept]:
        fail(f"supervision {image_path}: class ids or names differ")
    if segment:
        if det.mask is None or det.mask.shape[1:] != (ours["image_size"]["height"], ours["image_size"]["width"]):
            fail(f"supervision {image_path}: no masks at the image size from the points")
        for i in kept:
            pts = [c for q in preds[i]["points"] for c in (q["x"], q["y"])]
            if not any(pts == poly for poly in dets[i]["mask"]):
                fail(f"roboflow {image_path}: detection {i}'s points are none of /predict's polygons")
    return len(det)


def check_deepstack(url, key, image_path, t, custom):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    ours = predict(url, key, image_path, threshold=t, max_detections=300)["detections"]
    ds = DeepstackObject(ip=host, port=int(port), api_key=key or "", min_confidence=t, custom_model=custom)
    preds = ds.detect(open(image_path, "rb").read())
    want = [{"label": d["label"], "confidence": d["score"], "x_min": round(d["box"][0]), "y_min": round(d["box"][1]),
             "x_max": round(d["box"][2]), "y_max": round(d["box"][3])} for d in ours]
    got = [{k: p[k] for k in ("label", "confidence", "x_min", "y_min", "x_max", "y_max")} for p in preds]
    # Python rounds halves to even, JavaScript up: a box edge exactly on .5 may differ by one pixel.
    if len(got) != len(want) or any(g["label"] != w["label"] or g["confidence"] != w["confidence"] or
                                    any(abs(g[k] - w[k]) > 1 for k in ("x_min", "y_min", "x_max", "y_max")) for g, w in zip(got, want)):
        fail(f"deepstack {image_path} ({custom or 'detection'}): {got[:2]} != /predict {want[:2]}")
    return len(got)


def check_errors(url, key):
    client = InferenceHTTPClient(api_url=url, api_key=key)
    client.configure(InferenceConfiguration(api_key_transport="legacy"))
    try:
        client.infer(np.zeros((8, 8, 3), dtype=np.uint8), model_id="coco/36")
    except HTTPCallErrorError as e:
        if e.status_code != 404 or "not served here" not in (e.api_message or ""):
            fail(f"an unknown model_id: status {e.status_code}, message {e.api_message!r}")
    else:
        fail("an unknown model_id was served")
    if key:
        # The key in the Authorization header (the client's recommended transport) works as well as the body's.
        header = InferenceHTTPClient(api_url=url, api_key=key)
        header.configure(InferenceConfiguration(api_key_transport="header"))
        if header.get_model_description("rf-detr-base").task_type != "object-detection":
            fail("the registry through the header transport")
        bad = InferenceHTTPClient(api_url=url, api_key="not-a-key")
        bad.configure(InferenceConfiguration(api_key_transport="legacy"))
        try:
            bad.get_model_description("rf-detr-base")
        except HTTPCallErrorError as e:
            if e.status_code != 401:
                fail(f"a wrong key: status {e.status_code}")
        else:
            fail("a wrong key was accepted")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model-id", required=True)
    ap.add_argument("--segment", action="store_true")
    ap.add_argument("--api-key")
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    for path in a.images:
        t = threshold_for(a.url, a.api_key, path)
        n = check_roboflow(a.url, a.api_key, a.model_id, path, t, a.segment)
        msg = f"{path}: inference-sdk + supervision: {n} detections equal /predict's at threshold {t:.4f}"
        if not a.segment:
            n1 = check_deepstack(a.url, a.api_key, path, t, "")
            n2 = check_deepstack(a.url, a.api_key, path, t, a.model_id)
            msg += f"; deepstack-python /v1/vision/detection {n1}, /v1/vision/custom/{a.model_id} {n2}"
        print(f"compat-clients: {msg}")
    check_errors(a.url, a.api_key)
    print("compat-clients: PASS")


if __name__ == "__main__":
    main()
