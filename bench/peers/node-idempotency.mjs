// Peer 1: @node-idempotency/core with its Redis storage adapter, wired into
// express as its README says (onRequest before the handler, onResponse after;
// the package has no published express middleware).  POST /api/bench/:x is
// idempotent by the Idempotency-Key header and answers 201
// {"id":"<x>","ok":true}, the C bench handler's trivial work.
import express from "express";
import { Idempotency, IdempotencyError } from "@node-idempotency/core";
import { RedisStorageAdapter } from "@node-idempotency/storage-adapter-redis";
import { serve, ran, redisUrl } from "./serve.mjs";

const statusOf = {
  REQUEST_IN_PROGRESS: 409,
  IDEMPOTENCY_FINGERPRINT_MISSMATCH: 422,
};

serve(async () => {
  const storage = new RedisStorageAdapter({ url: redisUrl });
  await storage.connect();
  const idempotency = new Idempotency(storage);
  const app = express();
  app.post("/api/bench/:x", express.json(), async (req, res) => {
    const idem = {
      method: req.method,
      headers: req.headers,
      body: req.body,
      path: req.path,
    };
    try {
      const stored = await idempotency.onRequest(idem);
      if (stored) {
        res.status(stored.additional.status).json(stored.body);
        return;
      }
    } catch (err) {
      if (!(err instanceof IdempotencyError)) throw err;
      res.status(statusOf[err.code] || 400).json({ error: err.message });
      return;
    }
    ran();
    const body = { id: req.params.x, ok: true };
    await idempotency.onResponse(idem, { body, additional: { status: 201 } });
    res.status(201).json(body);
  });
  return app;
});
