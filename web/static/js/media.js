// An asset shown as what it is: a picture, a video or audio player, a 3D model drawn with
// three.js (served by the api under /static/vendor/, never from a CDN), else a download.
// Named by its title and its kind in words, never by its id.
import { ApiError, api, auth } from "./api.js";
import { h } from "./dom.js";
import { addStrings, t } from "./i18n.js";

addStrings({
  en: {
    kind_document: "document", kind_flow: "flow", kind_image: "image", kind_video: "video",
    kind_audio: "audio clip", kind_model: "3D model", kind_pdf: "PDF", kind_text: "text file",
    kind_file: "file", model_label: "3D model “{name}”: drag or use the arrow keys to turn it",
    model_unavailable: "This browser cannot draw 3D here (no WebGL); download the model instead.",
    media_failed: "This file could not be played here; download it instead.",
  },
  de: {
    kind_document: "Dokument", kind_flow: "Ablauf", kind_image: "Bild", kind_video: "Video",
    kind_audio: "Audioclip", kind_model: "3D-Modell", kind_pdf: "PDF", kind_text: "Textdatei",
    kind_file: "Datei", model_label: "3D-Modell „{name}“: ziehen oder mit den Pfeiltasten drehen",
    model_unavailable: "Dieser Browser kann hier kein 3D zeichnen (kein WebGL); lade das Modell herunter.",
    media_failed: "Diese Datei lässt sich hier nicht abspielen; lade sie herunter.",
  },
});

const THREE_URL = "/static/vendor/three/build/three.module.js";
const GLTF_URL = "/static/vendor/three/examples/jsm/loaders/GLTFLoader.js";

// What kind of thing an object is, in words: by its type, and an asset's by its media type.
export function kindOf(type, mediaType = "") {
  if (type !== "asset") return t(`kind_${type}`);
  const mt = (mediaType || "").toLowerCase();
  if (mt.startsWith("image/")) return t("kind_image");
  if (mt.startsWith("video/")) return t("kind_video");
  if (mt.startsWith("audio/")) return t("kind_audio");
  if (mt.startsWith("model/")) return t("kind_model");
  if (mt === "application/pdf") return t("kind_pdf");
  if (mt === "text/plain") return t("kind_text");
  return t("kind_file");
}

const cache = new Map();
// One version's bytes, fetched with the token (media need it too) and kept for the page's
// life: a version never changes.
function bytes(objectId, version) {
  const key = `${objectId}@${version}`;
  if (!cache.has(key)) {
    cache.set(key, (async () => {
      const r = await fetch(`/v1/objects/${objectId}/blob?version=${version}`, {
        headers: { Authorization: `Bearer ${auth.token}` },
      });
      if (!r.ok) throw new ApiError(r.status, {});
      return r.blob();
    })());
  }
  const p = cache.get(key);
  p.catch(() => cache.delete(key));
  return p;
}

const urls = new Map();
async function objectUrl(objectId, version, mediaType) {
  const key = `${objectId}@${version}`;
  if (!urls.has(key)) {
    const blob = await bytes(objectId, version);
    urls.set(key, URL.createObjectURL(new Blob([blob], { type: mediaType })));
  }
  return urls.get(key);
}

// The asset's bytes as a base64 string (a restore sends an old version's bytes again).
export async function base64Of(objectId, version) {
  const blob = await bytes(objectId, version);
  return new Promise((res, rej) => {
    const r = new FileReader();
    r.onload = () => res(String(r.result).split(",", 2)[1]);
    r.onerror = () => rej(r.error);
    r.readAsDataURL(blob);
  });
}

// A figure showing version `version` (default: the current one) of asset `objectId`.
export async function renderMedia(objectId, version) {
  const obj = await api(`/v1/objects/${objectId}${version ? `?version=${version}` : ""}`);
  const type = (obj.content?.media_type || "").toLowerCase();
  const kind = kindOf("asset", type);
  const fig = h("figure", { class: "artifact", dataset: { objectId, mediaType: type, version: obj.version } });
  const url = await objectUrl(objectId, obj.version, type);
  const download = h("a", { href: url, download: obj.name, class: "download" }, `${t("download")}: ${obj.name}`);
  const failed = () => fig.replaceChildren(h("p", { class: "muted" }, t("media_failed")), download, caption);
  const caption = h("figcaption", {}, obj.name, h("span", { class: "kind" }, ` (${kind})`));
  if (type.startsWith("image/")) fig.append(h("img", { src: url, alt: obj.name }));
  else if (type.startsWith("video/")) {
    fig.append(h("video", { src: url, controls: true, muted: true, playsInline: true, preload: "metadata", "aria-label": obj.name, onerror: failed }));
  } else if (type.startsWith("audio/")) {
    fig.append(h("audio", { src: url, controls: true, preload: "metadata", "aria-label": obj.name, onerror: failed }));
  } else if (type === "model/gltf-binary") {
    fig.append(await modelView(await (await bytes(objectId, obj.version)).arrayBuffer(), obj.name), download);
  } else fig.append(download);
  fig.append(caption);
  return fig;
}

// The model drawn on a canvas, lit and framed to fit; a drag or the arrow keys turn it.
// Drawn again only when it turns or the canvas changes size, and let go when removed.
async function modelView(buffer, name) {
  const [THREE, { GLTFLoader }] = await Promise.all([import(THREE_URL), import(GLTF_URL)]);
  const canvas = h("canvas", { class: "model-view", tabindex: "0", role: "img", "aria-label": t("model_label", { name }) });
  let renderer;
  try {
    renderer = new THREE.WebGLRenderer({ canvas, antialias: true, preserveDrawingBuffer: true });
  } catch {
    return h("p", { class: "muted" }, t("model_unavailable"));
  }
  const gltf = await new Promise((res, rej) => new GLTFLoader().parse(buffer, "", res, rej));
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0xf1efea);
  scene.add(new THREE.HemisphereLight(0xffffff, 0x8a8478, 2.2));
  const sun = new THREE.DirectionalLight(0xffffff, 2.0);
  sun.position.set(3, 5, 4);
  scene.add(sun);
  const model = gltf.scene;
  const box = new THREE.Box3().setFromObject(model);
  const size = box.getSize(new THREE.Vector3()).length() || 1;
  model.position.sub(box.getCenter(new THREE.Vector3()));
  const turn = new THREE.Group();
  turn.add(model);
  turn.rotation.set(0.45, -0.6, 0);
  scene.add(turn);
  const camera = new THREE.PerspectiveCamera(40, 4 / 3, size / 100, size * 10);
  camera.position.set(0, 0, size * 1.5);
  const draw = () => renderer.render(scene, camera);
  const rotate = (dx, dy) => { turn.rotation.y += dx; turn.rotation.x += dy; draw(); };
  let last = null;
  canvas.addEventListener("pointerdown", (e) => { last = [e.clientX, e.clientY]; canvas.setPointerCapture(e.pointerId); });
  canvas.addEventListener("pointermove", (e) => {
    if (!last) return;
    rotate((e.clientX - last[0]) / 100, (e.clientY - last[1]) / 100);
    last = [e.clientX, e.clientY];
  });
  canvas.addEventListener("pointerup", () => { last = null; });
  canvas.addEventListener("keydown", (e) => {
    const step = { ArrowLeft: [-0.2, 0], ArrowRight: [0.2, 0], ArrowUp: [0, -0.2], ArrowDown: [0, 0.2] }[e.key];
    if (step) { e.preventDefault(); rotate(...step); }
  });
  const fit = new ResizeObserver(() => {
    if (!canvas.isConnected) {
      fit.disconnect();
      renderer.dispose();
      return;
    }
    const w = canvas.clientWidth;
    if (!w) return;
    renderer.setPixelRatio(window.devicePixelRatio || 1);
    renderer.setSize(w, Math.round((w * 3) / 4), false);
    camera.aspect = 4 / 3;
    camera.updateProjectionMatrix();
    draw();
  });
  fit.observe(canvas);
  return canvas;
}
