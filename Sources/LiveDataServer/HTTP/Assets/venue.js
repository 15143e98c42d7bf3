// The venue page: every building as a facade with its live summary; pan and zoom; past the
// indoor zoom the building most centred in view opens and its floor goes live; following an
// asset keeps it centred across floors and buildings. What it asks the daemon for follows
// what it shows: the focused floor's changes (one stream, reopened when the focus moves),
// the summaries of the buildings in view (one summaries-only stream, reopened when the set
// changes) and, while following, the followed asset's changes.
"use strict";
(function () {
  const body = document.body;
  const dataset = body.dataset.dataset, venue = body.dataset.venue;
  const styleFields = JSON.parse(body.dataset.styleFields || "[]");
  const svgNS = "http://www.w3.org/2000/svg";
  const map = document.getElementById("map");
  const world = document.getElementById("world");
  const facadeLayer = document.getElementById("facades");
  const floorLayer = document.getElementById("floor");
  const assetLayer = document.getElementById("assets");
  const banner = document.getElementById("banner");

  // --- State ------------------------------------------------------------------
  let layout = null;            // GET /v1/venues/{dataset}/{venue}
  let projection = null;        // source coordinates <-> metres
  const buildings = new Map();  // building id -> {info, group, path, shape, bounds, centre, summary, busy, short}
  const camera = { x: 0, y: 0, zoom: 17 };
  let viewport = "overview";    // overview, idle, following, transitioning
  let autoFocus = true;
  let focus = null;             // {building, floor}
  let lastElevation = null;     // the elevation of the floor shown last
  const lastChosen = new Map(); // building -> the floor chosen there last
  let following = null;         // location id
  let followed = null;          // the followed location's latest record
  let animation = null;
  const shapes = new Map();     // location id -> {group, shape, title, name}
  const records = new Map();    // location id -> latest record on the focused floor
  let ruleTitles = new Map();
  let floorStream = null, summaryStream = null, followStream = null;
  let summaryScope = "";
  window.livedataFrames = 0;    // frames drawn, for the tests' frame rate
  // With `measure` in the URL the page keeps, for the scale tests, when it was first drawn,
  // when the focused floor last went live after a focus change, and how long after its
  // newest live value each change reached the screen.
  const measuring = new URLSearchParams(location.search).has("measure");
  const stats = { readyAt: null, focusAt: null, liveAt: null, latencies: [], summaryAt: new Map() };
  if (measuring) window.livedataStats = stats;
  // The changes taken since the last frame, counted as drawn once a frame has painted them.
  let drawnPending = [];
  function measureDrawn(record) {
    if (!measuring || !record.live) return;
    let newest = 0;
    for (const value of Object.values(record.live)) newest = Math.max(newest, Date.parse(value.timestamp) || 0);
    if (newest !== 0) drawnPending.push(newest);
  }
  function measureFrame() {
    if (drawnPending.length === 0) return;
    const now = Date.now();
    for (const t of drawnPending) stats.latencies.push(now - t);
    drawnPending = [];
  }

  // --- Projection -------------------------------------------------------------
  // Longitude/latitude when every point is in range and the venue spans less than a degree;
  // plain metres otherwise. Metres from the venue's north-west corner, y down.
  function makeProjection(points) {
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (const [x, y] of points) { minX = Math.min(minX, x); maxX = Math.max(maxX, x); minY = Math.min(minY, y); maxY = Math.max(maxY, y); }
    const degrees = minX >= -180 && maxX <= 180 && minY >= -90 && maxY <= 90 && maxX - minX < 1 && maxY - minY < 1;
    const latitude = degrees ? (minY + maxY) / 2 : 0;
    const sx = degrees ? 111320 * Math.cos(latitude * Math.PI / 180) : 1, sy = degrees ? 110540 : 1;
    return {
      degrees, latitude,
      at: ([x, y]) => [(x - minX) * sx, (maxY - y) * sy],
      back: ([x, y]) => [x / sx + minX, maxY - y / sy],
      width: (maxX - minX) * sx, height: (maxY - minY) * sy,
    };
  }

  // Zoom levels as a web map's: a level up doubles the scale; at level z a pixel is
  // 156543 × cos(latitude) / 2^z metres.
  function pixelsPerMetre(zoom) {
    return Math.pow(2, zoom) / (156543.03 * Math.cos((projection ? projection.latitude : 0) * Math.PI / 180));
  }

  // The map's size, read once and again when it changes: reading it from the element in a
  // frame, after the frame's first change to the SVG, would lay the page out again.
  let mapSize = null;
  function size() {
    if (!mapSize) mapSize = [map.clientWidth || 800, map.clientHeight || 600];
    return mapSize;
  }
  // A new size moves everything on screen at once: the SVG that takes the pointer follows
  // in the same frame (as after a jump), never a rest later.
  new ResizeObserver(() => { mapSize = null; jumped = true; requestFrame(); }).observe(map);

  function toWorld([px, py]) {
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    return [(px - w / 2) / s + camera.x, (py - h / 2) / s + camera.y];
  }

  function viewBounds() {
    const [w, h] = size();
    const [x0, y0] = toWorld([0, 0]), [x1, y1] = toWorld([w, h]);
    return { x0, y0, x1, y1 };
  }

  // --- Drawing the camera -----------------------------------------------------
  // A frame paints the canvas (`paint` below) and changes nothing else on the page while
  // a person moves the camera: the SVG (thousands of unpainted elements that take the
  // pointer) is placed where the camera is once it rests, or at once after a jump (the
  // page opening, the end of an animation, a followed asset's step), so that a frame costs
  // the page no layout.
  let frameRequested = false;
  function requestFrame() {
    if (frameRequested) return;
    frameRequested = true;
    requestAnimationFrame(drawFrame);
  }

  function worldTransform() {
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    return `translate(${(w / 2).toFixed(1)} ${(h / 2).toFixed(1)}) scale(${s.toFixed(6)}) translate(${(-camera.x).toFixed(3)} ${(-camera.y).toFixed(3)})`;
  }

  // The camera's last drawn place; a frame that finds it elsewhere is a frame of a move.
  const drawn = { x: NaN, y: NaN, zoom: NaN, width: 0, height: 0 };
  let moving = false, restTimer = null, jumped = true;
  function drawFrame() {
    frameRequested = false;
    window.livedataFrames++;
    const [w, h] = size();
    if (camera.x !== drawn.x || camera.y !== drawn.y || camera.zoom !== drawn.zoom || w !== drawn.width || h !== drawn.height) {
      Object.assign(drawn, { x: camera.x, y: camera.y, zoom: camera.zoom, width: w, height: h });
      clearTimeout(restTimer);
      if (jumped) {
        moving = false;
        place();
      } else {
        moving = true;
        restTimer = setTimeout(rest, 150);
      }
    }
    jumped = false;
    paint.frame();
    measureFrame();
  }

  // The camera rests: the SVG follows it, and the next frame paints the floor sharp.
  function rest() {
    moving = false;
    place();
    requestFrame();
  }

  function place() {
    const s = pixelsPerMetre(camera.zoom);
    world.setAttribute("transform", worldTransform());
    for (const dot of assetLayer.querySelectorAll("circle")) dot.setAttribute("r", (6 / s).toFixed(4));
    for (const dot of floorLayer.querySelectorAll("circle.asset-dot")) dot.setAttribute("r", (5 / s).toFixed(4));
    document.getElementById("zoom-level").textContent = camera.zoom.toFixed(1);
    map.dataset.zoom = camera.zoom.toFixed(4);
  }

  // A person moves the camera: frames follow until it rests.
  function cameraMoved() {
    requestFrame();
    scheduleViewWork();
  }

  // The camera jumps (an animation ends, a followed asset steps, the overview is asked
  // for): the SVG follows it at once, and the next frame is a rest.
  function cameraJumped() {
    jumped = true;
    place();
    requestFrame();
    scheduleViewWork();
  }

  // What depends on what is in view runs once the camera rests for a moment.
  let viewTimer = null;
  function scheduleViewWork() {
    clearTimeout(viewTimer);
    viewTimer = setTimeout(() => { updateFocus(); updateSummaryScope(); writeURL(); }, 120);
  }

  // --- Painting: the facades' fills and the focused floor on a canvas -----------------
  // The floor is painted into two bitmaps: `cache`, the whole floor at about the scale of
  // the camera's last rest (no labels), which a frame of a move draws transformed, one
  // image instead of thousands of shapes; and `sharp`, the view at the camera's rest,
  // labels included, which a frame at rest draws as it is. A live change repaints its
  // location's box in both (the shapes and labels that reach into it, in their order).
  const paint = (() => {
    const canvas = document.getElementById("paint");
    const screen = canvas.getContext("2d");
    const items = new Map();   // location id -> {path, box, anchor, order, look}
    let ordered = [];          // the items in drawing order
    let grid = null;           // cells of the floor -> the items whose box reaches in
    let extent = null;         // the floor's box, in metres
    let cache = null, sharp = null;
    const changed = new Set(); // items to repaint in the bitmaps at the next frame
    let dots = new Map();      // location id -> where its dot stands (assets, points)
    const labelFont = "600 11px system-ui, sans-serif";
    const labelReach = 40;     // pixels a label may reach beyond its location's box

    function ratio() { return window.devicePixelRatio || 1; }

    function bitmap(width, height) {
      const c = document.createElement("canvas");
      c.width = Math.max(1, Math.ceil(width));
      c.height = Math.max(1, Math.ceil(height));
      return { canvas: c, context: c.getContext("2d") };
    }

    function clear() {
      items.clear();
      ordered = [];
      grid = null;
      extent = null;
      cache = null;
      sharp = null;
      changed.clear();
      dots = new Map();
      requestFrame();
    }

    // A location's shape: polygons (rings of points in metres) or a point, in drawing order.
    function add(id, polygons, point) {
      const item = { id, order: ordered.length, look: null, path: null, box: null, anchor: null };
      if (point) {
        item.anchor = point;
        item.box = { x0: point[0], y0: point[1], x1: point[0], y1: point[1] };
        dots.set(id, point);
      } else {
        const path = new Path2D();
        let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
        for (const rings of polygons) for (const ring of rings) {
          ring.forEach(([x, y], i) => {
            if (i === 0) path.moveTo(x, y); else path.lineTo(x, y);
            x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
          });
          path.closePath();
        }
        item.path = path;
        item.box = { x0, y0, x1, y1 };
        const ring = polygons[0][0];
        item.anchor = ring.slice(0, -1).reduce((a, p) => [a[0] + p[0] / (ring.length - 1), a[1] + p[1] / (ring.length - 1)], [0, 0]);
      }
      items.set(id, item);
      ordered.push(item);
      extent = extent
        ? { x0: Math.min(extent.x0, item.box.x0), y0: Math.min(extent.y0, item.box.y0), x1: Math.max(extent.x1, item.box.x1), y1: Math.max(extent.y1, item.box.y1) }
        : Object.assign({}, item.box);
    }

    // The shapes are all in: the index of boxes, and the bitmaps painted afresh.
    function shapesAdded() {
      if (!extent) return;
      const span = Math.max(extent.x1 - extent.x0, extent.y1 - extent.y0, 1);
      const cell = span / 64;
      grid = { cell, x0: extent.x0, y0: extent.y0, cells: new Map() };
      for (const item of ordered) {
        for (const key of cellsOf(item.box)) {
          let list = grid.cells.get(key);
          if (!list) grid.cells.set(key, (list = []));
          list.push(item);
        }
      }
      cache = null;
      sharp = null;
      requestFrame();
    }

    // The grid's cells that `box` reaches into (every item lies within the grid's 65 × 65).
    function* cellsOf(box) {
      const index = (v, origin) => Math.min(64, Math.max(0, Math.floor((v - origin) / grid.cell)));
      const i0 = index(box.x0, grid.x0), i1 = index(box.x1, grid.x0), j0 = index(box.y0, grid.y0), j1 = index(box.y1, grid.y0);
      for (let i = i0; i <= i1; i++) for (let j = j0; j <= j1; j++) yield i * 65536 + j;
    }

    // The items whose box reaches into `box` (metres), in drawing order.
    function within(box) {
      if (!grid) return [];
      const found = new Set();
      for (const key of cellsOf(box)) {
        for (const item of grid.cells.get(key) || []) {
          const b = item.box;
          if (b.x1 >= box.x0 && b.x0 <= box.x1 && b.y1 >= box.y0 && b.y0 <= box.y1) found.add(item);
        }
      }
      return [...found].sort((a, b) => a.order - b.order);
    }

    // A location's look (from `render`); none when it has no shape to paint.
    function setLook(id, look) {
      const item = items.get(id);
      if (!item) return;
      item.look = look;
      if (item.path) changed.add(item);
      requestFrame();
    }

    function setDot(id, at) {
      if (at) dots.set(id, at); else dots.delete(id);
      requestFrame();
    }

    // Paints `list` into `target` (a bitmap with its scale and origin: metres to pixels),
    // clipped to `clip` (pixels) when given.
    function paintInto(target, list, labels, clip) {
      const context = target.context, k = target.scale;
      context.save();
      context.setTransform(1, 0, 0, 1, 0, 0);
      if (clip) {
        context.beginPath();
        context.rect(clip.x, clip.y, clip.width, clip.height);
        context.clip();
        context.clearRect(clip.x, clip.y, clip.width, clip.height);
      } else {
        context.clearRect(0, 0, target.canvas.width, target.canvas.height);
      }
      context.setTransform(k, 0, 0, k, -target.x * k, -target.y * k);
      const lineScale = target.lineScale / k;
      for (const item of list) {
        const look = item.look;
        if (!item.path || !look || look.hidden || look.shapeHidden) continue;
        if (look.fillOpacity > 0) {
          context.globalAlpha = look.fillOpacity;
          context.fillStyle = look.fill;
          context.fill(item.path, "evenodd");
        }
        if (look.strokeOpacity > 0 && look.strokeWidth > 0) {
          context.globalAlpha = look.strokeOpacity;
          context.strokeStyle = look.stroke;
          context.lineWidth = look.strokeWidth * lineScale;
          context.stroke(item.path);
        }
      }
      if (labels) {
        context.setTransform(1, 0, 0, 1, 0, 0);
        context.globalAlpha = 1;
        context.font = labelFont;
        context.textAlign = "center";
        context.textBaseline = "middle";
        context.fillStyle = "#1d2330";
        for (const item of list) {
          const look = item.look;
          if (!look || look.hidden || !look.label) continue;
          context.fillText(look.label, (item.anchor[0] - target.x) * k, (item.anchor[1] - target.y) * k);
        }
      }
      context.restore();
    }

    // The whole floor at about `scale` pixels a metre, within 2048 pixels a side.
    function makeCache(scale) {
      const margin = 2;
      const width = extent.x1 - extent.x0, height = extent.y1 - extent.y0;
      const k = Math.min(scale, 2048 / Math.max(width, height, 1));
      const target = bitmap((width) * k + 2 * margin, (height) * k + 2 * margin);
      Object.assign(target, { scale: k, x: extent.x0 - margin / k, y: extent.y0 - margin / k, lineScale: 1 });
      paintInto(target, ordered, false, null);
      return target;
    }

    // The view at the camera's rest, labels included.
    function makeSharp() {
      const [w, h] = size(), r = ratio(), s = pixelsPerMetre(camera.zoom);
      const target = bitmap(w * r, h * r);
      Object.assign(target, { scale: s * r, x: camera.x - w / 2 / s, y: camera.y - h / 2 / s, lineScale: r, camera: { x: camera.x, y: camera.y, zoom: camera.zoom, w, h } });
      const reach = labelReach / s;
      paintInto(target, within({ x0: target.x - reach, y0: target.y - reach, x1: target.x + w / s + reach, y1: target.y + h / s + reach }), true, null);
      return target;
    }

    // Repaints the changed items' boxes in a bitmap: what reaches into each box, labels of
    // the neighbours included, in order.
    function repaint(target, labels) {
      const k = target.scale, reach = labels ? labelReach / k : 2 / k;
      for (const item of changed) {
        const b = item.box;
        const stroke = ((item.look && item.look.strokeWidth) || 1) * target.lineScale + 2;
        const clip = {
          x: Math.floor((b.x0 - target.x) * k - stroke), y: Math.floor((b.y0 - target.y) * k - stroke),
          width: Math.ceil((b.x1 - b.x0) * k + 2 * stroke) + 1, height: Math.ceil((b.y1 - b.y0) * k + 2 * stroke) + 1,
        };
        if (labels) {
          // The item's own label may reach past its box.
          clip.x = Math.min(clip.x, Math.floor((item.anchor[0] - target.x) * k - labelReach));
          clip.width = Math.max(clip.width, 2 * labelReach);
          clip.y = Math.min(clip.y, Math.floor((item.anchor[1] - target.y) * k - 8));
          clip.height = Math.max(clip.height, 16);
        }
        if (clip.x + clip.width < 0 || clip.y + clip.height < 0 || clip.x > target.canvas.width || clip.y > target.canvas.height) continue;
        const box = { x0: target.x + clip.x / k - reach, y0: target.y + clip.y / k - reach, x1: target.x + (clip.x + clip.width) / k + reach, y1: target.y + (clip.y + clip.height) / k + reach };
        paintInto(target, within(box), labels, clip);
      }
    }

    function sameView(target) {
      const [w, h] = size();
      const c = target.camera;
      return c.x === camera.x && c.y === camera.y && c.zoom === camera.zoom && c.w === w && c.h === h;
    }

    let hovered = null;        // the building under the pointer
    let followedAt = null;     // where the followed asset stands

    function setHovered(building) {
      if (hovered === building) return;
      hovered = building;
      requestFrame();
    }

    function setFollowed(at) {
      followedAt = at;
      requestFrame();
    }

    function facadeLook(item) {
      const open = focus && focus.building === item.info.building;
      const over = hovered === item.info.building;
      if (open) return { fill: "#ffffff", alpha: 0.85, stroke: "#2458c6", width: 2.5 };
      return { fill: item.busy ? "#e3b6b0" : "#c9ced8", alpha: 1, stroke: over ? "#2458c6" : "#58627a", width: 1.5 };
    }

    function dot(x, y, radius, colour, r) {
      screen.fillStyle = colour;
      screen.beginPath();
      screen.arc(x, y, radius * r, 0, 2 * Math.PI);
      screen.fill();
      screen.stroke();
    }

    // One frame: the canvas sized to the map; the facades' fills; the floor (the sharp view
    // at rest, else the cache transformed); the outlines; the dots; the buildings' names.
    function frame() {
      const [w, h] = size(), r = ratio();
      if (canvas.width !== Math.round(w * r) || canvas.height !== Math.round(h * r)) {
        canvas.width = Math.round(w * r);
        canvas.height = Math.round(h * r);
        canvas.style.width = w + "px";
        canvas.style.height = h + "px";
      }
      const s = pixelsPerMetre(camera.zoom), k = s * r;
      const toScreen = [k, 0, 0, k, (w / 2 - camera.x * s) * r, (h / 2 - camera.y * s) * r];
      screen.setTransform(1, 0, 0, 1, 0, 0);
      screen.clearRect(0, 0, canvas.width, canvas.height);
      screen.setTransform(...toScreen);
      const looks = new Map();
      for (const item of buildings.values()) {
        const look = facadeLook(item);
        looks.set(item, look);
        screen.globalAlpha = look.alpha;
        screen.fillStyle = look.fill;
        screen.fill(item.shape, "evenodd");
      }
      screen.globalAlpha = 1;
      if (extent && ordered.length > 0) {
        // Many changes at once (a snapshot) are one painting afresh.
        if (changed.size > 64 && changed.size > ordered.length / 8) { cache = null; sharp = null; changed.clear(); }
        // The cache follows the scale of the rests: painted again when it is off by more
        // than half a zoom level and a closer one fits.
        const wanted = Math.min(k, 2048 / Math.max(extent.x1 - extent.x0, extent.y1 - extent.y0, 1));
        if (!cache || (!moving && Math.abs(Math.log2(cache.scale / wanted)) > 0.5)) { cache = makeCache(k); changed.clear(); }
        if (moving) sharp = null;
        else if (!sharp || !sameView(sharp)) { repaint(cache, false); sharp = makeSharp(); changed.clear(); }
        if (changed.size > 0) {
          repaint(cache, false);
          if (sharp) repaint(sharp, true);
          changed.clear();
        }
        if (sharp) {
          screen.setTransform(1, 0, 0, 1, 0, 0);
          screen.drawImage(sharp.canvas, 0, 0);
          screen.setTransform(...toScreen);
        } else {
          screen.drawImage(cache.canvas, cache.x, cache.y, cache.canvas.width / cache.scale, cache.canvas.height / cache.scale);
        }
      }
      for (const item of buildings.values()) {
        const look = looks.get(item);
        screen.strokeStyle = look.stroke;
        screen.lineWidth = look.width / s;
        screen.stroke(item.shape);
      }
      // Dots and names keep their size on screen.
      screen.setTransform(1, 0, 0, 1, 0, 0);
      const at = ([x, y]) => [(x - camera.x) * k + (w / 2) * r, (y - camera.y) * k + (h / 2) * r];
      screen.strokeStyle = "#ffffff";
      screen.lineWidth = 2 * r;
      for (const [id, where] of dots) {
        const item = items.get(id);
        if (item && item.look && item.look.hidden) continue;
        const [x, y] = at(where);
        if (x < -10 || y < -10 || x > canvas.width + 10 || y > canvas.height + 10) continue;
        dot(x, y, 5, "#2458c6", r);
      }
      if (followedAt) dot(...at(followedAt), 6, "#e07b00", r);
      screen.textAlign = "center";
      screen.textBaseline = "alphabetic";
      screen.lineJoin = "round";
      screen.strokeStyle = "#ffffffd0";
      screen.lineWidth = 3 * r;
      screen.fillStyle = "#1d2330";
      for (const item of buildings.values()) {
        // An open building's name stands above its outline, off the floor it shows.
        const open = focus && focus.building === item.info.building;
        const [x, y0] = at(open ? [item.centre[0], item.bounds.y0] : item.centre);
        const y = open ? y0 - 26 * r : y0;
        if (x < -200 * r || y < -40 * r || x > canvas.width + 200 * r || y > canvas.height + 40 * r) continue;
        screen.font = `600 ${12 * r}px system-ui, sans-serif`;
        screen.strokeText(item.info.name || item.info.building, x, y);
        screen.fillText(item.info.name || item.info.building, x, y);
        screen.font = `400 ${12 * r}px system-ui, sans-serif`;
        screen.strokeText(item.short, x, y + 14.4 * r);
        screen.fillText(item.short, x, y + 14.4 * r);
      }
    }

    return { clear, add, shapesAdded, setLook, setDot, setHovered, setFollowed, frame };
  })();

  function setViewport(state) {
    viewport = state;
    body.dataset.viewport = state;
    document.getElementById("viewport-state").textContent = state;
  }

  // --- Camera moves -------------------------------------------------------------
  function clampZoom(zoom) { return Math.min(23, Math.max(12, zoom)); }

  function zoomAround(point, zoom) {
    const before = toWorld(point);
    camera.zoom = clampZoom(zoom);
    const after = toWorld(point);
    camera.x += before[0] - after[0];
    camera.y += before[1] - after[1];
  }

  // A person moved the camera: following and the overview end.
  function userMoved() {
    cancelAnimation();
    if (following) stopFollowing();
    else if (viewport !== "idle") setViewport("idle");
  }

  function cancelAnimation() {
    if (animation) { cancelAnimationFrame(animation.frame); animation = null; }
  }

  // An animated move to `target`; the viewport is `transitioning` until it ends in `then`.
  function flyTo(target, then, duration = 450) {
    cancelAnimation();
    const from = { x: camera.x, y: camera.y, zoom: camera.zoom };
    const start = performance.now();
    setViewport("transitioning");
    const step = (now) => {
      const t = Math.min(1, (now - start) / duration), e = t < 0.5 ? 2 * t * t : 1 - Math.pow(-2 * t + 2, 2) / 2;
      camera.x = from.x + (target.x - from.x) * e;
      camera.y = from.y + (target.y - from.y) * e;
      camera.zoom = from.zoom + (target.zoom - from.zoom) * e;
      if (t < 1) { requestFrame(); animation.frame = requestAnimationFrame(step); return; }
      animation = null;
      cameraJumped();
      setViewport(then);
    };
    animation = { frame: requestAnimationFrame(step) };
  }

  function overviewCamera() {
    const [w, h] = size();
    const width = Math.max(projection.width, 10), height = Math.max(projection.height, 10);
    const s = Math.min(w / (width * 1.15), h / (height * 1.15));
    const zoom = Math.log2(s * 156543.03 * Math.cos(projection.latitude * Math.PI / 180));
    return { x: projection.width / 2, y: projection.height / 2, zoom: clampZoom(zoom) };
  }

  function showOverview(animated) {
    if (following) stopFollowing(true);
    const target = overviewCamera();
    if (animated) flyTo(target, "overview");
    else { Object.assign(camera, target); setViewport("overview"); cameraJumped(); }
  }

  // The facade under the pointer is outlined.
  facadeLayer.addEventListener("pointerover", (event) => {
    const building = event.target.closest(".building");
    paint.setHovered(building ? building.dataset.building : null);
  });
  facadeLayer.addEventListener("pointerout", () => paint.setHovered(null));

  // Wheel: zoom around the pointer.
  map.addEventListener("wheel", (event) => {
    event.preventDefault();
    userMoved();
    const rect = map.getBoundingClientRect();
    const delta = event.deltaMode === 1 ? event.deltaY * 33 : event.deltaY;
    zoomAround([event.clientX - rect.left, event.clientY - rect.top], camera.zoom - delta * 0.0025);
    cameraMoved();
  }, { passive: false });

  // Drag with one pointer, pinch with two.
  const pointers = new Map();
  let pinch = null;
  map.addEventListener("pointerdown", (event) => {
    map.setPointerCapture(event.pointerId);
    pointers.set(event.pointerId, [event.clientX, event.clientY]);
    pointers.get(event.pointerId).moved = false;
    if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      pinch = { distance: Math.hypot(a[0] - b[0], a[1] - b[1]), zoom: camera.zoom };
    }
  });
  map.addEventListener("pointermove", (event) => {
    const last = pointers.get(event.pointerId);
    if (!last) return;
    const rect = map.getBoundingClientRect();
    if (pointers.size === 2 && pinch) {
      pointers.set(event.pointerId, Object.assign([event.clientX, event.clientY], { moved: true }));
      const [a, b] = [...pointers.values()];
      const distance = Math.hypot(a[0] - b[0], a[1] - b[1]);
      userMoved();
      zoomAround([(a[0] + b[0]) / 2 - rect.left, (a[1] + b[1]) / 2 - rect.top], pinch.zoom + Math.log2(distance / Math.max(pinch.distance, 1)));
      cameraMoved();
      return;
    }
    const dx = event.clientX - last[0], dy = event.clientY - last[1];
    if (!last.moved && Math.hypot(dx, dy) < 3) return;
    if (!last.moved) userMoved();
    map.classList.add("dragging");
    const s = pixelsPerMetre(camera.zoom);
    camera.x -= dx / s;
    camera.y -= dy / s;
    pointers.set(event.pointerId, Object.assign([event.clientX, event.clientY], { moved: true }));
    cameraMoved();
  });
  const pointerEnd = (event) => {
    const last = pointers.get(event.pointerId);
    pointers.delete(event.pointerId);
    if (pointers.size < 2) pinch = null;
    map.classList.remove("dragging");
    if (last && !last.moved && event.type === "pointerup") click(event);
  };
  map.addEventListener("pointerup", pointerEnd);
  map.addEventListener("pointercancel", pointerEnd);

  // Keyboard: arrows pan an eighth of the view, + and − zoom, 0 or Home the whole venue,
  // Escape stops following.
  map.addEventListener("keydown", (event) => {
    const [w, h] = size(), s = pixelsPerMetre(camera.zoom);
    const pan = { ArrowLeft: [-w / 8, 0], ArrowRight: [w / 8, 0], ArrowUp: [0, -h / 8], ArrowDown: [0, h / 8] }[event.key];
    if (pan) {
      userMoved();
      camera.x += pan[0] / s;
      camera.y += pan[1] / s;
    } else if (event.key === "+" || event.key === "=") {
      userMoved();
      camera.zoom = clampZoom(camera.zoom + 0.5);
    } else if (event.key === "-" || event.key === "_") {
      userMoved();
      camera.zoom = clampZoom(camera.zoom - 0.5);
    } else if (event.key === "0" || event.key === "Home") {
      showOverview(true);
      event.preventDefault();
      return;
    } else if (event.key === "Escape") {
      if (following) stopFollowing();
      return;
    } else return;
    event.preventDefault();
    cameraMoved();
  });

  document.getElementById("zoom-in").addEventListener("click", () => { userMoved(); flyTo({ x: camera.x, y: camera.y, zoom: clampZoom(camera.zoom + 1) }, "idle", 250); });
  document.getElementById("zoom-out").addEventListener("click", () => { userMoved(); flyTo({ x: camera.x, y: camera.y, zoom: clampZoom(camera.zoom - 1) }, "idle", 250); });
  document.getElementById("overview").addEventListener("click", () => showOverview(true));

  // A click (a press without a drag): an asset is followed; with auto focus off, a
  // facade takes the focus.
  function click(event) {
    if (moving) place();
    const target = document.elementFromPoint(event.clientX, event.clientY);
    const asset = target && target.closest("[data-asset]");
    if (asset) { follow(asset.dataset.asset); return; }
    const building = target && target.closest(".building");
    if (building && !autoFocus) {
      const item = buildings.get(building.dataset.building);
      const zoom = Math.max(camera.zoom, layout.view.indoorZoom);
      focusBuilding(item.info.building);
      flyTo({ x: item.centre[0], y: item.centre[1], zoom }, "idle");
    }
  }

  // --- Buildings ------------------------------------------------------------------
  function pathData(rings) {
    return rings.map((ring) => ring.map((p, i) => (i === 0 ? "M" : "L") + projection.at(p).map((v) => v.toFixed(2)).join(" ")).join(" ") + " Z").join(" ");
  }

  function drawBuildings() {
    const points = [];
    for (const b of layout.buildings) for (const ring of b.footprint) for (const p of ring) points.push(p);
    document.getElementById("no-geometry").hidden = points.length > 0;
    if (points.length === 0) return false;
    projection = makeProjection(points);
    for (const info of layout.buildings) {
      const group = document.createElementNS(svgNS, "g");
      group.setAttribute("class", "building");
      group.dataset.building = info.building;
      const path = document.createElementNS(svgNS, "path");
      path.setAttribute("class", "facade");
      path.setAttribute("d", pathData(info.footprint));
      const title = document.createElementNS(svgNS, "title");
      title.textContent = "Building " + (info.name || info.building);
      group.append(title, path);
      facadeLayer.appendChild(group);
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity, area = 0, cx = 0, cy = 0;
      for (const ring of info.footprint) {
        const pts = ring.map(projection.at);
        for (const [x, y] of pts) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
        for (let i = 0; i + 1 < pts.length; i++) {
          const c = pts[i][0] * pts[i + 1][1] - pts[i + 1][0] * pts[i][1];
          area += c; cx += (pts[i][0] + pts[i + 1][0]) * c; cy += (pts[i][1] + pts[i + 1][1]) * c;
        }
      }
      const centre = area !== 0 ? [cx / (3 * area), cy / (3 * area)] : [(x0 + x1) / 2, (y0 + y1) / 2];
      buildings.set(info.building, {
        info, group, path, title, bounds: { x0, y0, x1, y1 }, rings: info.footprint.map((r) => r.map(projection.at)), centre, summary: null,
        shape: new Path2D(pathData(info.footprint)), busy: false, short: shortText(null),
      });
    }
    return true;
  }

  function summaryText(summary) {
    if (!summary || !summary.locations) return "no reports yet";
    const states = Object.keys(summary.states || {}).sort().filter((s) => s !== "none").map((s) => s + " " + summary.states[s]);
    const people = summary.capacity > 0 ? summary.people + "/" + summary.capacity + " people" : summary.people + " people";
    return (states.length ? states.join(" · ") + " · " : "") + people;
  }

  // On the map a facade says its people against capacity (or its locations), to stay short
  // among its neighbours; the list beside the map and the facade's title say everything.
  function shortText(summary) {
    if (!summary || !summary.locations) return "no reports yet";
    return summary.capacity > 0 ? summary.people + "/" + summary.capacity + " people" : summary.locations + " locations";
  }

  function renderBuildingSummary(item) {
    const text = summaryText(item.summary);
    item.short = shortText(item.summary);
    item.title.textContent = "Building " + (item.info.name || item.info.building) + ": " + text;
    item.group.dataset.summary = text;
    const s = item.summary;
    item.busy = !!(s && s.capacity > 0 && s.people / s.capacity >= 0.5);
    item.group.classList.toggle("busy", item.busy);
    requestFrame();
    const entry = document.querySelector(`#buildings li[data-building="${CSS.escape(item.info.building)}"]`);
    if (entry) entry.textContent = (item.info.name || item.info.building) + ": " + text;
  }

  function inView(item, bounds) {
    const b = item.bounds;
    return b.x1 >= bounds.x0 && b.x0 <= bounds.x1 && b.y1 >= bounds.y0 && b.y0 <= bounds.y1;
  }

  function contains(rings, [x, y]) {
    let inside = false;
    for (const ring of rings) {
      for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
        const [xi, yi] = ring[i], [xj, yj] = ring[j];
        if ((yi > y) !== (yj > y) && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
      }
    }
    return inside;
  }

  // The building most centred in view: the one under the centre, else the nearest whose
  // outline is in view.
  function mostCentred() {
    const centre = [camera.x, camera.y], bounds = viewBounds();
    let best = null, bestDistance = Infinity;
    for (const item of buildings.values()) {
      if (contains(item.rings, centre)) return item;
      if (!inView(item, bounds)) continue;
      const d = Math.hypot(item.centre[0] - centre[0], item.centre[1] - centre[1]);
      if (d < bestDistance) { best = item; bestDistance = d; }
    }
    return best;
  }

  // --- Focus ----------------------------------------------------------------------
  function updateFocus() {
    if (!layout || following) return;
    if (camera.zoom < layout.view.outdoorZoom) { if (focus) unfocus(); return; }
    if (!autoFocus || camera.zoom < layout.view.indoorZoom) return;
    const item = mostCentred();
    if (item && (!focus || focus.building !== item.info.building)) focusBuilding(item.info.building);
  }

  // The floor a building opens on: the one last chosen there, else the one at the
  // elevation of the floor left behind, else its default.
  function floorOnFocus(info) {
    const chosen = lastChosen.get(info.building);
    if (chosen && info.floors.some((f) => f.floor === chosen)) return chosen;
    if (lastElevation !== null) {
      let best = null;
      for (const f of info.floors) {
        if (f.elevation === null || f.elevation === undefined) continue;
        const d = Math.abs(f.elevation - lastElevation);
        if (d < 1 && (!best || d < best.d)) best = { floor: f.floor, d };
      }
      if (best) return best.floor;
    }
    return info.defaultFloor || (info.floors[0] && info.floors[0].floor);
  }

  function focusBuilding(building, floor) {
    const item = buildings.get(building);
    if (!item) return;
    showFloor(building, floor || floorOnFocus(item.info));
  }

  function unfocus() {
    focus = null;
    for (const item of buildings.values()) item.group.classList.remove("open");
    requestFrame();
    closeFloorStream();
    floorLayer.replaceChildren();
    shapes.clear();
    records.clear();
    paint.clear();
    body.dataset.focus = "";
    body.dataset.live = "";
    document.getElementById("focus-title").textContent = "";
    renderFloorButtons();
    document.getElementById("summary").textContent = "";
    writeURL();
  }

  function showFloor(building, floor) {
    if (!floor) return;
    if (focus && focus.building === building && focus.floor === floor) return;
    focus = { building, floor };
    stats.focusAt = performance.now();
    stats.liveAt = null;
    const item = buildings.get(building);
    const info = item.info.floors.find((f) => f.floor === floor);
    if (info && info.elevation !== null && info.elevation !== undefined) lastElevation = info.elevation;
    for (const other of buildings.values()) other.group.classList.toggle("open", other === item);
    requestFrame();
    body.dataset.focus = building + "/" + floor;
    body.dataset.live = "";
    document.getElementById("focus-title").textContent = "· building " + (item.info.name || building) + " · floor " + floor
      + (info && info.elevation != null ? " (" + info.elevation + " m)" : "");
    renderFloorButtons();
    openFloor(building, floor);
    writeURL();
  }

  function renderFloorButtons() {
    const list = document.getElementById("floors");
    list.replaceChildren();
    document.getElementById("floors-hint").hidden = !!focus;
    if (!focus) return;
    const info = buildings.get(focus.building).info;
    for (const f of info.floors.slice().reverse()) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.floor = f.floor;
      button.textContent = f.floor;
      if (f.elevation != null) button.title = f.elevation + " m";
      button.setAttribute("aria-pressed", String(f.floor === focus.floor));
      button.addEventListener("click", () => {
        lastChosen.set(focus.building, f.floor);
        showFloor(focus.building, f.floor);
      });
      list.appendChild(button);
    }
  }

  // --- The focused floor, live -----------------------------------------------------
  let floorGeneration = 0;
  function closeFloorStream() {
    floorGeneration++;
    if (floorStream) { floorStream.close(); floorStream = null; }
  }

  async function openFloor(building, floor) {
    closeFloorStream();
    const generation = floorGeneration;
    const scope = new URLSearchParams({ dataset, venue, building, floor }).toString();
    floorLayer.replaceChildren();
    shapes.clear();
    records.clear();
    paint.clear();
    let features = [];
    try { features = (await (await fetch("/v1/geometry?" + scope)).json()).features; } catch (e) { /* drawn as it reports */ }
    if (generation !== floorGeneration) return;
    drawFloor(features);
    const stream = new EventSource("/v1/events?" + scope);
    floorStream = stream;
    stream.addEventListener("open", () => { banner.hidden = true; });
    stream.addEventListener("error", () => { banner.hidden = false; });
    stream.addEventListener("snapshot", (e) => {
      banner.hidden = true;
      const snapshot = JSON.parse(e.data);
      ruleTitles = new Map();
      for (const entry of snapshot.legend.entries) for (const rule of entry.rules) ruleTitles.set(rule, entry.title);
      records.clear();
      for (const record of snapshot.locations) records.set(record.location, record);
      for (const id of shapes.keys()) render(id);
      for (const record of snapshot.locations) placeAsset(record);
      renderFloorSummary(snapshot.summaries.find((s) => s.floor === floor));
      updateFollowChoices();
      body.dataset.live = building + "/" + floor;
      stats.liveAt = performance.now();
    });
    stream.addEventListener("change", (e) => {
      const change = JSON.parse(e.data);
      if (change.topic.building !== building || change.topic.floor !== floor) { removeLocation(change.location); return; }
      records.set(change.location, change);
      render(change.location);
      placeAsset(change);
      measureDrawn(change);
      // Only a location with a position can join the list of assets to follow.
      if (change.position) updateFollowChoices();
    });
    stream.addEventListener("remove", (e) => removeLocation(JSON.parse(e.data).location));
    stream.addEventListener("summary", (e) => {
      const summary = JSON.parse(e.data);
      if (summary.floor === floor) renderFloorSummary(summary);
    });
  }

  function removeLocation(id) {
    if (!records.delete(id)) return;
    render(id);
    const dot = floorLayer.querySelector(`circle.asset-dot[data-asset="${CSS.escape(id)}"]`);
    if (dot) dot.remove();
    paint.setDot(id, null);
  }

  function renderFloorSummary(summary) {
    document.getElementById("summary").textContent = summary ? "This floor: " + summary.locations + " locations; " + summaryText(summary) + "." : "";
  }

  // Each location is an unpainted SVG element (its title, its style as attributes) that
  // takes the pointer, and a shape of the painter.
  function drawFloor(features) {
    for (const feature of features) {
      const id = feature.properties.id;
      const group = document.createElementNS(svgNS, "g");
      group.setAttribute("class", "loc");
      group.setAttribute("data-location", id);
      const title = document.createElementNS(svgNS, "title");
      group.appendChild(title);
      const g = feature.geometry;
      let shape, anchor;
      if (g.type === "Point") {
        shape = document.createElementNS(svgNS, "circle");
        anchor = projection.at(g.coordinates);
        shape.setAttribute("cx", anchor[0]);
        shape.setAttribute("cy", anchor[1]);
        shape.setAttribute("r", (5 / pixelsPerMetre(camera.zoom)).toFixed(4));
        shape.setAttribute("class", "shape asset-dot");
        group.dataset.asset = id;
        paint.add(id, null, anchor);
      } else {
        const polygons = g.type === "Polygon" ? [g.coordinates] : g.coordinates;
        shape = document.createElementNS(svgNS, "path");
        shape.setAttribute("d", polygons.map(pathData).join(" "));
        shape.setAttribute("fill-rule", "evenodd");
        shape.setAttribute("class", "shape");
        paint.add(id, polygons.map((rings) => rings.map((ring) => ring.map(projection.at))));
      }
      group.appendChild(shape);
      floorLayer.appendChild(group);
      shapes.set(id, { group, shape, title, name: feature.properties.name || id });
    }
    paint.shapesAdded();
  }

  // A location that reports a position is drawn there (an asset), on its floor.
  function placeAsset(record) {
    if (!record.position || !projection.degrees) return;
    const [x, y] = projection.at([record.position.longitude, record.position.latitude]);
    let dot = floorLayer.querySelector(`circle.asset-dot[data-asset="${CSS.escape(record.location)}"]`);
    const item = shapes.get(record.location);
    if (item && item.shape.tagName === "circle") dot = item.shape;
    if (!dot) {
      dot = document.createElementNS(svgNS, "circle");
      dot.setAttribute("class", "asset-dot");
      dot.dataset.asset = record.location;
      dot.setAttribute("r", (5 / pixelsPerMetre(camera.zoom)).toFixed(4));
      const title = document.createElementNS(svgNS, "title");
      title.textContent = record.location + ": follow it";
      dot.appendChild(title);
      floorLayer.appendChild(dot);
    }
    dot.setAttribute("cx", x.toFixed(2));
    dot.setAttribute("cy", y.toFixed(2));
    paint.setDot(record.location, [x, y]);
  }

  function stateOf(record) {
    if (!record || !record.rules || record.rules.length === 0) return "none";
    return ruleTitles.get(record.rules[record.rules.length - 1]) || "none";
  }

  // A location's style, drawn from the daemon's table of style fields (as the floor page).
  function render(id) {
    const item = shapes.get(id);
    if (!item) return;
    const record = records.get(id);
    const style = (record && record.style) || {};
    const state = record ? stateOf(record) : "no report";
    const hidden = new Set(), content = {}, attributes = [];
    for (const field of styleFields) {
      const value = style[field.name];
      switch (field.drawing) {
        case "shows": if (value === false) hidden.add(field.part); break;
        case "content": if (value !== undefined && value !== null) content[field.part] = value; break;
        case "attribute": attributes.push([field.part, field.attribute, value ?? field.unset]); break;
      }
    }
    item.group.classList.toggle("hidden-style", hidden.has("location"));
    item.shape.style.display = hidden.has("shape") ? "none" : "";
    item.group.dataset.state = state;
    const label = content.label !== undefined && !hidden.has("label") ? String(content.label) : "";
    const parts = [item.name + ": " + state];
    if (label) parts.push(label);
    item.title.textContent = parts.join(" · ");
    const elements = { location: item.group, shape: item.shape };
    const drawn = {};
    for (const [part, attribute, value] of attributes) {
      // The zoom range is the map's to apply, not the floor's: left as data attributes.
      if (elements[part]) elements[part].setAttribute(attribute, value);
      if (part === "shape") drawn[attribute] = value;
    }
    if (item.shape.tagName === "circle") item.shape.setAttribute("class", "shape asset-dot");
    paint.setLook(id, {
      hidden: hidden.has("location"), shapeHidden: hidden.has("shape"), label,
      fill: drawn["fill"], fillOpacity: number(drawn["fill-opacity"], 1),
      stroke: drawn["stroke"], strokeWidth: number(drawn["stroke-width"], 1), strokeOpacity: number(drawn["stroke-opacity"], 1),
    });
  }

  function number(value, fallback) {
    const n = parseFloat(value);
    return isFinite(n) ? n : fallback;
  }

  // --- Following an asset ------------------------------------------------------------
  function updateFollowChoices() {
    const select = document.getElementById("follow");
    const ids = new Set([...records.values()].filter((r) => r.position).map((r) => r.location));
    if (following) ids.add(following);
    const current = new Set([...select.options].map((o) => o.value).filter((v) => v));
    if (ids.size === current.size && [...ids].every((id) => current.has(id))) { select.value = following || ""; return; }
    select.replaceChildren(new Option("nothing", ""));
    for (const id of [...ids].sort()) select.appendChild(new Option(id, id));
    select.value = following || "";
  }

  document.getElementById("follow").addEventListener("change", (e) => { if (e.target.value) follow(e.target.value); else stopFollowing(); });

  function follow(id) {
    if (following === id) return;
    stopFollowing(true);
    following = id;
    followed = null;
    body.dataset.following = id;
    updateFollowChoices();
    const stream = new EventSource("/v1/events?" + new URLSearchParams({ dataset, venue, location: id }).toString());
    followStream = stream;
    const take = (record) => {
      if (!record || following !== id) return;
      followed = record;
      moveToFollowed(true);
    };
    stream.addEventListener("snapshot", (e) => take(JSON.parse(e.data).locations.find((r) => r.location === id)));
    stream.addEventListener("change", (e) => take(JSON.parse(e.data)));
    setViewport("following");
    writeURL();
  }

  function stopFollowing(quietly) {
    if (!following) return;
    if (followStream) { followStream.close(); followStream = null; }
    for (const dot of assetLayer.querySelectorAll("circle")) dot.remove();
    paint.setFollowed(null);
    following = null;
    followed = null;
    body.dataset.following = "";
    updateFollowChoices();
    if (!quietly) setViewport("idle");
    writeURL();
  }

  // The view goes where the followed asset is: its building and floor in focus, the camera
  // on its position (animated when it jumped further than the view's half).
  function moveToFollowed(animated) {
    const record = followed;
    const topic = record.topic;
    if (!focus || focus.building !== topic.building || focus.floor !== topic.floor) {
      if (buildings.has(topic.building)) showFloor(topic.building, topic.floor);
    }
    if (!record.position || !projection.degrees) {
      const item = buildings.get(topic.building);
      if (item) centreOn(item.centre, animated);
      return;
    }
    const at = projection.at([record.position.longitude, record.position.latitude]);
    let marker = assetLayer.querySelector("circle");
    if (!marker) {
      marker = document.createElementNS(svgNS, "circle");
      marker.setAttribute("class", "asset-dot followed");
      marker.setAttribute("r", (6 / pixelsPerMetre(camera.zoom)).toFixed(4));
      assetLayer.appendChild(marker);
    }
    marker.dataset.asset = record.location;
    marker.setAttribute("cx", at[0].toFixed(2));
    marker.setAttribute("cy", at[1].toFixed(2));
    paint.setFollowed(at);
    centreOn(at, animated);
  }

  function centreOn(at, animated) {
    const zoom = Math.max(camera.zoom, layout.view.indoorZoom);
    const [w] = size(), s = pixelsPerMetre(camera.zoom);
    const far = Math.hypot(at[0] - camera.x, at[1] - camera.y) * s > w / 2;
    if (animated && (far || zoom !== camera.zoom)) flyTo({ x: at[0], y: at[1], zoom }, "following");
    else {
      cancelAnimation();
      camera.x = at[0]; camera.y = at[1]; camera.zoom = zoom;
      setViewport("following");
      cameraJumped();
    }
  }

  // --- Summaries of the buildings in view ---------------------------------------------
  function updateSummaryScope() {
    if (!layout) return;
    const bounds = viewBounds();
    const visible = [...buildings.values()].filter((item) => inView(item, bounds)).map((item) => item.info.building).sort();
    const list = document.getElementById("buildings");
    const key = visible.join("\u0000");
    if (key === summaryScope && summaryStream) return;
    summaryScope = key;
    list.replaceChildren(...visible.map((b) => {
      const li = document.createElement("li");
      li.dataset.building = b;
      return li;
    }));
    for (const b of visible) renderBuildingSummary(buildings.get(b));
    if (summaryStream) { summaryStream.close(); summaryStream = null; }
    if (visible.length === 0) return;
    const query = new URLSearchParams({ dataset, venue, only: "summaries" });
    for (const b of visible) query.append("building", b);
    const stream = new EventSource("/v1/events?" + query.toString());
    summaryStream = stream;
    const take = (summary) => {
      if (summary.floor !== undefined && summary.floor !== null) return;
      const item = buildings.get(summary.building);
      if (!item) return;
      item.summary = summary;
      renderBuildingSummary(item);
      if (measuring) stats.summaryAt.set(summary.building, Date.now());
    };
    stream.addEventListener("open", () => { banner.hidden = true; });
    stream.addEventListener("error", () => { banner.hidden = false; });
    stream.addEventListener("snapshot", (e) => { banner.hidden = true; JSON.parse(e.data).summaries.forEach(take); body.dataset.summaries = "live"; });
    stream.addEventListener("summary", (e) => take(JSON.parse(e.data)));
  }

  // --- The URL holds the view ---------------------------------------------------------
  let urlTimer = null;
  function writeURL() {
    clearTimeout(urlTimer);
    urlTimer = setTimeout(() => {
      if (!projection) return;
      const query = new URLSearchParams();
      if (focus) { query.set("building", focus.building); query.set("floor", focus.floor); }
      const [x, y] = projection.back([camera.x, camera.y]);
      const digits = projection.degrees ? 7 : 2;
      query.set("center", x.toFixed(digits) + "," + y.toFixed(digits));
      query.set("zoom", camera.zoom.toFixed(2));
      if (!autoFocus) query.set("autoFocus", "false");
      if (following) query.set("follow", following);
      history.replaceState(null, "", location.pathname + "?" + query.toString());
    }, 200);
  }

  document.getElementById("auto-focus").addEventListener("change", (e) => {
    autoFocus = e.target.checked;
    writeURL();
    updateFocus();
  });

  // --- Start ------------------------------------------------------------------------
  async function start() {
    try {
      const response = await fetch("/v1/venues/" + encodeURIComponent(dataset) + "/" + encodeURIComponent(venue));
      layout = await response.json();
    } catch (e) {
      banner.hidden = false;
      setTimeout(start, 1000);
      return;
    }
    if (!drawBuildings()) { body.dataset.ready = "true"; return; }
    const query = new URLSearchParams(location.search);
    autoFocus = query.has("autoFocus") ? query.get("autoFocus") !== "false" : layout.view.autoFocus;
    document.getElementById("auto-focus").checked = autoFocus;
    const center = (query.get("center") || "").split(",").map(parseFloat);
    const zoom = parseFloat(query.get("zoom"));
    if (center.length === 2 && center.every(isFinite) && isFinite(zoom)) {
      [camera.x, camera.y] = projection.at(center);
      camera.zoom = clampZoom(zoom);
      setViewport("idle");
    } else {
      Object.assign(camera, overviewCamera());
      setViewport("overview");
    }
    // The first view is a jump: a frame drawn before (the map's first size) took the first.
    jumped = true;
    drawFrame();
    if (query.get("building") && buildings.has(query.get("building"))) {
      const building = query.get("building"), floor = query.get("floor");
      if (floor) lastChosen.set(building, floor);
      focusBuilding(building, floor || undefined);
    }
    updateSummaryScope();
    updateFocus();
    if (query.get("follow")) follow(query.get("follow"));
    body.dataset.ready = "true";
    stats.readyAt = performance.now();
  }

  start();
})();
