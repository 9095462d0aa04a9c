// The peers' baseline: the same express server and handler, no idempotency
// and no Redis (as bench/run's bare row is idemfcgi with idempotency off).
// POST /api/bench/:x answers 201 {"id":"<x>","ok":true}.
import express from "express";
import { serve, ran } from "./serve.mjs";

serve(async () => {
  const app = express();
  app.post("/api/bench/:x", express.json(), (req, res) => {
    ran();
    res.status(201).json({ id: req.params.x, ok: true });
  });
  return app;
});
