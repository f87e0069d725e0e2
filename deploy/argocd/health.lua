-- Argo CD health check for sparkdlq.io/DeadLetterPolicy (Lua 5.1, as Argo CD runs it).
-- Install: deploy/argocd/README.md (argocd-cm key
-- resource.customizations.health.sparkdlq.io_DeadLetterPolicy).
--
--   Progressing  no status yet, or status.observedGeneration < metadata.generation
--                (the operator has not acted on the latest spec)
--   Degraded     phase Failed (the Spark job failed) or Invalid (the spec is refused)
--   Suspended    phase Suspended (spec.suspend: true)
--   Healthy      condition Ready is True
--   Progressing  otherwise (provisioning topics, submitting or restarting the job)
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    if c.reason ~= nil and c.reason ~= "" then
      return c.reason .. ": " .. c.message
    end
    return c.message
  end
  return fallback
end

local status = obj.status
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the spark-dlq operator to pick up the policy"
  return hs
end

local generation = obj.metadata.generation
local observed = status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the spark-dlq operator to observe generation " .. tostring(generation)
  return hs
end

local phase = status.phase
local ready = condition(status, "Ready")

if phase == "Failed" or phase == "Invalid" then
  hs.status = "Degraded"
  hs.message = describe(ready, "Phase " .. phase)
  return hs
end

if phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = describe(condition(status, "JobRunning"), "spec.suspend is true: the job is stopped")
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "The policy's job is running")
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready, "Phase " .. tostring(phase or "Pending"))
return hs
